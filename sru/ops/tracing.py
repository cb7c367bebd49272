"""Whether an exporter is tracing the model right now: the fast CPU paths (GEMM dispatch, int8, fused
kernels) step aside for the export-friendly form (sru/ops/export.py) then. Its own module, below both
``sru.ops.export`` and ``sru.ops.cpu``, so neither imports the other for it."""
import contextlib
import threading
import warnings
from typing import Optional

import torch


def exporting() -> bool:
    """Whether ``torch.onnx.export`` or ``torch.export`` is tracing right now."""
    return torch.onnx.is_in_onnx_export() or torch.compiler.is_exporting()


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def eager_cpu(a: torch.Tensor, b: Optional[torch.Tensor] = None) -> bool:
    """The one guard of every fast CPU route (the GEMM libraries, bf16 and int8 products, the fused kernels'
    paths): plain CPU tensors (no subclass) in eager execution, outside compile, export, functorch transforms
    (``torch.func.grad``, vmap), any Python dispatch mode (a mode would see the one-time measurements'
    products) and ``torch.jit.trace`` (traced sizes are tensors, and the direct kernel calls go through
    ctypes, which the tracer cannot see). Cheapest tests first: this runs before every projection."""
    # ``exporting()`` in two cheaper parts: ``torch.export`` / dynamo ONNX export (``is_exporting``), and the
    # TorchScript-based ONNX exporter, which traces (``jit.is_tracing``; ``is_in_onnx_export`` is slower per call)
    return (type(a) in _PLAIN and a.is_cpu and (b is None or (type(b) in _PLAIN and b.is_cpu))
            and not torch.compiler.is_compiling() and not torch.compiler.is_exporting()
            and not torch._C._are_functorch_transforms_active()
            and torch._C._len_torch_dispatch_stack() == 0 and not torch.jit.is_tracing())



_quiet = threading.local()


def tracing_loudly() -> bool:
    """Whether ``torch.jit.trace`` is tracing outside ``quiet_tracer`` (a layer's forward then
    calls itself again inside it)."""
    return torch.jit.is_tracing() and not getattr(_quiet, "active", False)


@contextlib.contextmanager
def quiet_tracer():
    """Hide ``torch.jit.trace``'s TracerWarnings raised in this package's own code. They come from
    the layers' shape checks and path choices comparing traced sizes; a trace records fixed
    shapes anyway (docs/deploy.md#torchscript), so each names nothing a user can act on, and
    every trace printed a screenful of them. Warnings from other packages still show."""
    _quiet.active = True
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning, module=r"sru(\.|$)")
            yield
    finally:
        _quiet.active = False
