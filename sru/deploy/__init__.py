"""Export an SRU / SRUpp model and compile it with AOTInductor (docs/deploy.md).

``export(model, example)`` is ``torch.export.export`` under ``torch.no_grad`` with the length
and batch dimensions of the first input dynamic; on CPU the recurrence is recorded as the
fused kernel's op ``sru_cpp::recurrence_forward`` (sru/ops/cpu/custom_op.py).
``compile_package(model, example, path)`` compiles that program into an AOTInductor package
(``.pt2``) which ``load_package`` (``torch._inductor.aoti_load_package`` after loading the op
library) runs from Python and
``torch::inductor::AOTIModelPackageLoader`` from C++ (examples/cpp/); the package's metadata
records the input width and the op library a C++ program must load first.

    python -m sru.deploy op-library     # build if needed, print the library's path
"""
import sys
from pathlib import Path
from typing import Optional

import torch
from torch import nn

from sru.deploy.checks import MAX_BATCH, MAX_LENGTH, CheckedPackage, InputSpec, checked_program
from sru.deploy.onnx import CheckedSession, onnx_session
from sru.ops.backends import load_op_library, op_error

def dynamic_shapes(example: torch.Tensor, batch_first: bool = False):
    """(length, batch) of the first input as export ``Dim``s, for the model's one input."""
    from torch.export import Dim

    length, batch = Dim("length", min=1, max=MAX_LENGTH), Dim("batch", min=1, max=MAX_BATCH)
    dims = {0: batch, 1: length} if batch_first else {0: length, 1: batch}
    return (dims,)


def _example_for_dynamic_dims(example: torch.Tensor) -> torch.Tensor:
    """``example`` with a length or batch of 1 repeated to 2: torch.export specialises a size-1
    dimension to the constant 1 (and then refuses to make it dynamic); the rows repeated change
    nothing the traced graph computes."""
    if not isinstance(example, torch.Tensor) or example.dim() != 3:
        return example  # the model's own check names what it expects
    return example.repeat(*(2 if size == 1 else 1 for size in example.shape[:2]), 1)


def _check_model(model, example) -> None:
    """An exported program is for inference, of the width the model takes (refused here, before tracing:
    torch.export would record training-mode dropout, or fail on the width with symbolic sizes)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"sru.deploy.export expected an nn.Module (an SRU, SRUpp or a model holding one), got "
                         f"{type(model).__name__}")
    if model.training:
        raise ValueError("sru.deploy.export: the model is in training mode (its dropout would be part of the "
                         "program); call model.eval() first: an exported program is for inference (docs/deploy.md)")
    width = getattr(model, "input_size", None)
    if isinstance(width, int) and isinstance(example, torch.Tensor) and example.dim() == 3 \
            and example.shape[-1] != width:
        shape = InputSpec(width, getattr(model, "batch_first", False)).shape()
        raise ValueError(f"sru.deploy.export: the example has width {example.shape[-1]}, and the model takes "
                         f"input_size={width}; give an example of shape {shape}")


def export(model: nn.Module, example: torch.Tensor, dynamic: bool = True):
    """``torch.export.export(model, (example,))`` for inference, length and batch dynamic. The
    program's ``module()`` checks its input as ``InputSpec`` says (sru/deploy/checks.py)."""
    _check_model(model, example)
    batch_first = getattr(model, "batch_first", False)
    spec = InputSpec.of(example, batch_first, dynamic)
    spec.check("sru.deploy.export: the example", example)
    shapes = None
    if dynamic:
        example, shapes = _example_for_dynamic_dims(example), dynamic_shapes(example, batch_first)
    with torch.no_grad():
        return checked_program(torch.export.export(model, (example,), dynamic_shapes=shapes), spec)


def compile_package(model: nn.Module, example: torch.Tensor, path, dynamic: bool = True) -> str:
    """Export ``model`` and compile it into the AOTInductor package ``path``; returns the path.
    The package's metadata holds ``sru_op_library`` (empty when the graph has no ``sru_cpp``
    op, e.g. with SRU_EXPORT_FUSED=0) and the input it takes (``InputSpec.metadata``)."""
    program = export(model, example, dynamic)
    uses_op = any(str(node.target).startswith("sru_cpp.") for node in program.graph.nodes)
    library = load_op_library() if uses_op else None
    metadata = {**InputSpec.of(example, getattr(model, "batch_first", False), dynamic).metadata(),
                "sru_op_library": str(library) if library else ""}
    return torch._inductor.aoti_compile_and_package(
        program, package_path=str(path),
        inductor_configs={"aot_inductor.metadata": metadata})


def load_package(path) -> CheckedPackage:
    """``torch._inductor.aoti_load_package(path)`` after loading the ``sru_cpp`` op library that
    a package with the fused kernel calls (else: "Could not find schema for
    sru_cpp::recurrence_forward"), in a wrapper that checks each input against the package's
    metadata (a compiled graph reads out of bounds on a wrong width or rank)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"sru.deploy.load_package: no package file at {path}; make one with "
                                "sru.deploy.compile_package (docs/deploy.md)")
    load_op_library()
    try:
        runner = torch._inductor.aoti_load_package(str(path))
    except RuntimeError as err:  # not a zip archive, or one without a compiled model in it
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"sru.deploy.load_package: {path} is not an AOTInductor package ({first}); make one "
                         "with sru.deploy.compile_package (docs/deploy.md)") from None
    return CheckedPackage(runner, InputSpec.from_metadata(runner.get_metadata(), path))


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["op-library"]:
        print("usage: python -m sru.deploy op-library", file=sys.stderr)
        return 2
    path: Optional[Path] = load_op_library()
    if path is None:
        print(f"error: the sru_cpp op library could not be built: {op_error()}", file=sys.stderr)
        return 2
    print(path)
    return 0

