"""Whether an exporter is tracing the model right now: the fast CPU paths (GEMM dispatch, int8, fused
kernels) step aside for the export-friendly form (sru/ops/export.py) then. Its own module, below both
``sru.ops.export`` and ``sru.ops.cpu``, so neither imports the other for it."""
import contextlib
import threading
import warnings

import torch


def exporting() -> bool:
    """Whether ``torch.onnx.export`` or ``torch.export`` is tracing right now."""
    return torch.onnx.is_in_onnx_export() or torch.compiler.is_exporting()



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
