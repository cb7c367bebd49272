"""Translation decoding's own steps: ``beam_rows`` (beam search's pass over each step's logits,
tasks/translation/beam_rows.py, against log_softmax) and ``decode_attention`` (decoding's attention kernel,
tasks/translation/decode_attention.py, against torch's scaled_dot_product_attention)."""
