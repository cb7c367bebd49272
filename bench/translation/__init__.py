"""Translation decoding's own steps: ``beam_rows`` (beam search's pass over each step's logits,
tasks/translation/beam_rows.py, against log_softmax)."""
