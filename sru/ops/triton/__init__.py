"""The Triton backend (GPU; CPU under TRITON_INTERPRET=1): ``padded`` and ``packed`` entries
(sru/ops/spec.py), the custom ops around the kernels (padded.py), the packed launches
(packed.py) and the kernels themselves (kernels.py). Imports without triton installed; the
kernels are jitted on first use."""
from .kernels import _SKIP_NONE, _SKIP_U3, _SKIP_X, _kernels, triton  # noqa: F401
from .packed import packed
from .padded import (_launch_config, _recurrence_backward, _recurrence_forward,  # noqa: F401
                     elementwise_recurrence_triton, padded)

if triton is not None:  # scripts/check_gpu.py and the tests compile them directly
    from .kernels import _sru_backward_kernel, _sru_forward_kernel  # noqa: F401

__all__ = ["elementwise_recurrence_triton", "packed", "padded"]
