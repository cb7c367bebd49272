"""The layer's decoding kernels (sru/ops/cpu/decoding.py) against what they replace: ``beam_rows`` (beam search's
pass over each step's logits, against log_softmax) and ``decode_attention`` (few-query attention over cached keys,
against torch's scaled_dot_product_attention)."""
