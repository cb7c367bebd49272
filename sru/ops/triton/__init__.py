"""The Triton backend (GPU; CPU under TRITON_INTERPRET=1): ``padded`` and ``packed`` entries
(sru/ops/spec.py), the custom ops around the kernels (padded.py), the packed launches
(packed.py) and the kernels themselves (kernels.py). Imports without triton installed; the
kernels are jitted on first use."""
from .packed import packed
from .padded import elementwise_recurrence_triton, padded

__all__ = ["elementwise_recurrence_triton", "packed", "padded"]
