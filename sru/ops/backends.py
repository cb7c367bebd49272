"""The one door into the kernels: ``TABLE``, one entry per backend, and how ``auto`` picks one.

A backend is a module with two entries, ``padded(U, x, weight_c, bias, c0, masks, spec)`` and
``packed(U, x, weight_c, bias, c0, masks, spec, layout)`` (sru/ops/spec.py), plus, optionally, a
module of whole-layer and whole-stack entry points (``paths``) that the layer asks for before it
runs the general path (matmul, then the recurrence):

    inference_plan(cells, input) -> plan | None        no autograd: can these cells run one direct call each?
    run_inference_path(plan, input, c0, mask_pad)      ... then run them: (h, c)
    fuse_layer(cell, input, c0) -> bool                 training: can matmul + recurrence be one function?
    linear_recurrence(x, weight, weight_c, bias, c0, masks, spec, packing=None)   ... then run it
    stack_plan(sru, input, c0, mask_pad) -> plan | None  a whole stack in inference: can it be one call?
    run_stack(sru, plan, input, c0, mask_pad) -> (h, c) | None   ... then run it

``sru.forward_routes.choose_route`` asks them, in the order of its table (docs/ops.md#forward-routes).

and ``matmul(x, weight, library)``, the layer's products U = x W (the CPU GEMM dispatch, sru/ops/cpu/gemm.py).

Adding a backend means its own folder under sru/ops/ and one entry here; nothing else names it
(``BACKENDS``, ``available_backends``, the config schema's choices and the tests read this table).
``export`` is not a user choice: while ``torch.onnx.export`` / ``torch.export`` trace, every backend
runs as the export form (a ``scan`` over time, sru/ops/export.py). docs/ops.md#adding-a-backend.
"""
import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Callable, Dict, Optional

import torch
from torch import Tensor

import sru.ops.export as export_backend
from .cpu import gemm as cpu_gemm, routes as cpu_routes
from .cpu.build import cpu_kernel_available, load_error
# The CPU backend's pieces that the floors above use (deploy's custom op, the decoding kernels built by the
# same build: beam search's row pass and few-query attention, the bench's kernel and int8 measurements): named
# here, so that nothing outside sru/ops imports sru.ops.cpu, whose layout may then change freely.
from .cpu import autograd as cpu_autograd, int8 as cpu_int8, kernel as cpu_kernel  # noqa: F401
from .cpu import decoding as cpu_decoding  # noqa: F401  (beam_rows, attend: sru/ops/cpu/decoding.py)
from .cpu import paths as cpu_paths, stack as cpu_stack  # noqa: F401  (bench.decode's step profile)
from .cpu import inference as cpu_inference, srupp_step as cpu_srupp_step  # noqa: F401  (SRU++ decoding)
from .cpu.build import compile_flags, load_library, load_or_build, short_log  # noqa: F401
from .cpu.custom_op import load_op_library, op_error  # noqa: F401
from .cpu.int8 import int8_engine  # noqa: F401  (which engine runs int8 products: SRU_INT8_ENGINE overrides)
from .tracing import exporting


def triton_available() -> bool:
    """Triton installed and a GPU to run it on."""
    return triton_importable() is None and torch.cuda.is_available()


def triton_importable() -> Optional[str]:
    """None when ``import triton`` works, else why not."""
    try:
        importlib.import_module("triton")
    except ImportError as err:
        return f"triton is not installed ({err})"
    return None


def _cpu_untestable() -> Optional[str]:
    return None if cpu_kernel_available() else f"fused CPU kernel could not be built: {load_error()}"


@dataclass(frozen=True)
class Backend:
    module: str                                   # the module with ``padded`` and ``packed``
    device: Optional[str]                         # the tensors ``auto`` gives it ("cpu", "cuda"); None: any
    available: Callable[[], bool]                 # whether it runs in this process (may build it)
    untestable: Callable[[], Optional[str]]       # None when the tests can run it here, else why not
    paths: Optional[str] = None                   # the module of its whole-layer / whole-stack entry points
    lazy: bool = False                            # imported on first use (importing triton costs seconds)
    interpreted_without_gpu: bool = False         # CPU tensors run it in an interpreter (tests only)


TABLE: Dict[str, Backend] = {
    "reference": Backend("sru.ops.reference", None, lambda: True, lambda: None),
    "cpu": Backend("sru.ops.cpu", "cpu", cpu_kernel_available, _cpu_untestable, paths="sru.ops.cpu.paths"),
    # on CPU tensors (no GPU) the tests run it under TRITON_INTERPRET=1 (sru.testing.triton_interpreter)
    "triton": Backend("sru.ops.triton", "cuda", triton_available, triton_importable, lazy=True,
                      interpreted_without_gpu=True),
}
BACKENDS = ("auto", *TABLE)

# ``auto``: the first entry made for the tensors' device. Imported modules, so that resolving is a
# plain dict lookup (``importlib`` cannot be traced by torch.compile); the rest load on first use.
_AUTO = {}
for _name, _entry in TABLE.items():
    _AUTO.setdefault(_entry.device, _name)
_LOADED: Dict[str, ModuleType] = {"export": export_backend, **{
    name: importlib.import_module(entry.module) for name, entry in TABLE.items() if not entry.lazy}}
_PATHS = {entry.device: importlib.import_module(entry.paths)
          for entry in TABLE.values() if entry.paths is not None and not entry.lazy}


def available_backends() -> list:
    """Backends usable in this process (``cpu`` is built here if it was not yet)."""
    return [name for name, entry in TABLE.items() if entry.available()]


def check_backend_name(backend) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, received {backend!r}")


def resolve_name(backend: str, U: Tensor) -> str:
    """The backend that runs: ``export`` while exporting, ``auto`` made concrete."""
    if exporting():
        return "export"
    device = U.device.type
    if backend == "auto":
        name = _AUTO.get(device, "reference")
        # a CPU kernel that does not build: the reference, after one warning (a GPU backend that
        # cannot load raises in ``resolve`` instead, naming what to install)
        return name if device != "cpu" or TABLE[name].available() else "reference"
    wanted = TABLE[backend].device
    if wanted == "cpu" and device != "cpu":
        raise ValueError(f"backend={backend!r} needs CPU tensors, received U on {U.device}; use "
                         f"backend='auto' or {_AUTO.get(device, 'reference')!r}")
    return backend


def resolve(backend: str, U: Tensor) -> ModuleType:
    """The module of the backend that runs on U (see ``resolve_name``)."""
    name = resolve_name(backend, U)
    module = _LOADED.get(name)
    if module is not None:
        return module
    try:
        module = _LOADED[name] = importlib.import_module(TABLE[name].module)
    except ImportError as exc:
        raise RuntimeError(f"the {name} backend (needed for {U.device.type.upper()} tensors) is unavailable: "
                           f"{exc}. Install what it needs (triton: `pip install triton`) or pass "
                           "backend='reference'") from exc
    return module


# The whole-layer / whole-stack entry points, asked of the backend that serves the input's device
# (each checks the cells' own ``backend`` and returns None / False when its path does not apply).
def _paths(input: Tensor):
    """The entry points for ``input``'s device, or None. ``is_cpu`` first: ``.device`` builds an object, a
    few hundred ns at every decoding step."""
    return _PATHS.get("cpu" if input.is_cpu else input.device.type)


def inference_plan(cells, input: Tensor):
    paths = _paths(input)
    return None if paths is None else paths.inference_plan(cells, input)


def run_inference_path(plan, input: Tensor, c0: Optional[Tensor], mask_pad: Optional[Tensor]):
    return _paths(input).run_inference_path(plan, input, c0, mask_pad)


def fuse_layer(cell, input: Tensor, c0: Optional[Tensor]) -> bool:
    paths = _paths(input)
    return paths is not None and paths.fuse_layer(cell, input, c0)


def linear_recurrence(x: Tensor, weight: Tensor, weight_c: Tensor, bias: Tensor, c0: Optional[Tensor],
                      masks, spec, packing=None, gemm: str = "auto"):
    return _paths(x).linear_recurrence(x, weight, weight_c, bias, c0, masks, spec, packing, gemm)


def stack_plan(sru, input, c0, mask_pad):
    if type(input) is not Tensor:  # a PackedSequence: the packed path
        return None
    paths = _PATHS.get("cpu" if input.is_cpu else input.device.type)  # _paths, inlined: every decoding step
    return None if paths is None else paths.stack_plan(sru, input, c0, mask_pad)


def run_stack(sru, plan, input: Tensor, c0: Optional[Tensor], mask_pad: Optional[Tensor]):
    return _PATHS["cpu" if input.is_cpu else input.device.type].run_stack(sru, plan, input, c0, mask_pad)


# The projection entry points (sru/ops/cpu/routes.py, one table of routes: int8 with an ``Int8Weight``, bf16,
# fp32 through MKL or oneDNN by a measured choice; ``torch.mm`` / ``F.linear`` off CPU), reached through this
# door like the entries above; and what configures and reports them.
LIBRARIES = cpu_gemm.LIBRARIES
check_library = cpu_gemm.check_library
clear_cpu_gemm_cache, cpu_gemm_report = cpu_gemm.clear_cpu_gemm_cache, cpu_gemm.cpu_gemm_report


def matmul(x: Tensor, weight: Tensor, library: str = "auto", int8=None, precision=None) -> Tensor:
    """The layer's products U = x W (weight stored (in, out)); ``int8``: the weight's ``Int8Weight``;
    ``precision``: the layer's ``sru.Precision`` (None: what autocast says)."""
    return cpu_routes.matmul(x, weight, library, False, int8, precision)


def linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, library: str = "auto", int8=None,
           precision=None) -> Tensor:
    """``F.linear`` (weight stored (out, in)) through the same entry point."""
    return cpu_routes.linear(x, weight, bias, library, int8, precision)
