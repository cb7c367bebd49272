"""Whether an exporter is tracing the model right now: the fast CPU paths (GEMM dispatch, int8, fused
kernels) step aside for the export-friendly form (sru/ops/export.py) then. Its own module, below both
``sru.ops.export`` and ``sru.ops.cpu``, so neither imports the other for it."""
import torch


def exporting() -> bool:
    """Whether ``torch.onnx.export`` or ``torch.export`` is tracing right now."""
    return torch.onnx.is_in_onnx_export() or torch.compiler.is_exporting()
