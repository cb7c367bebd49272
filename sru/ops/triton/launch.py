"""Launch a Triton kernel; a failure to compile or launch it becomes one line.

On a real GPU a kernel can fail where CI cannot see it: an architecture the installed Triton or
driver does not support, an out-of-resources launch, a ptxas error. Triton's own message is a
long traceback from its compiler or driver; the user needs to know which layer and which kernel
variant failed, and that ``backend="reference"`` (the PyTorch recurrence) runs the layer
anyway. ``launch`` raises ``TritonKernelError`` with the variant and that fix;
``sru.cell_base.RecurrentCellBase`` adds the layer (sru/cell_base.py ``_recurrence``).
"""
import torch

from ..errors import TritonKernelError


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n")[:1]).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text[:200]}"


def variant_name(kernel: str, dtype: torch.dtype, constexprs: dict) -> str:
    """``forward[float32, K=3, SKIP=1, ..., BLOCK=128, num_warps=4]``: what was compiled."""
    flags = ", ".join(f"{name}={value}" for name, value in constexprs.items()
                      if isinstance(value, (bool, int)))  # not the packed layout's tensors
    return f"{kernel}[{str(dtype).replace('torch.', '')}, {flags}]"


def launch(kernel, grid, kind: str, device: torch.device, args: tuple, constexprs: dict,
           layer: str = "") -> None:
    """``kernel[grid](*args, **constexprs)``, raising ``TritonKernelError`` in one line;
    ``layer`` describes the layer's recurrence (hidden size, directions) for the message."""
    try:
        kernel[grid](*args, **constexprs)
    except Exception as exc:  # compiler, ptxas, driver or launch errors alike
        where = str(device)
        if device.type == "cuda":
            major, minor = torch.cuda.get_device_capability(device)
            where += f" (sm_{major}{minor})"
        raise TritonKernelError(
            f"the Triton {variant_name(kind, args[0].dtype, constexprs)} kernel of the SRU "
            f"layer ({layer}) failed to "
            f"compile or launch on {where}: {_first_line(exc)}; run the layer with "
            "backend=\"reference\" (e.g. model.backend = \"reference\")") from None
