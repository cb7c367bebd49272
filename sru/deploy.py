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

from sru.ops.cpu.custom_op import load_op_library, op_error

MAX_LENGTH, MAX_BATCH = 1 << 16, 1 << 14


def dynamic_shapes(example: torch.Tensor, batch_first: bool = False):
    """(length, batch) of the first input as export ``Dim``s, for the model's one input."""
    from torch.export import Dim

    length, batch = Dim("length", min=1, max=MAX_LENGTH), Dim("batch", min=1, max=MAX_BATCH)
    dims = {0: batch, 1: length} if batch_first else {0: length, 1: batch}
    return (dims,)


def export(model: nn.Module, example: torch.Tensor, dynamic: bool = True):
    """``torch.export.export(model, (example,))`` for inference, length and batch dynamic."""
    shapes = dynamic_shapes(example, getattr(model, "batch_first", False)) if dynamic else None
    with torch.no_grad():
        return torch.export.export(model, (example,), dynamic_shapes=shapes)


def compile_package(model: nn.Module, example: torch.Tensor, path, dynamic: bool = True) -> str:
    """Export ``model`` and compile it into the AOTInductor package ``path``; returns the path.
    The package's metadata holds ``sru_input_size`` and ``sru_op_library`` (empty when the
    graph has no ``sru_cpp`` op, e.g. with SRU_EXPORT_FUSED=0)."""
    program = export(model, example, dynamic)
    uses_op = any(str(node.target).startswith("sru_cpp.") for node in program.graph.nodes)
    library = load_op_library() if uses_op else None
    metadata = {"sru_input_size": str(example.shape[-1]),
                "sru_op_library": str(library) if library else ""}
    return torch._inductor.aoti_compile_and_package(
        program, package_path=str(path),
        inductor_configs={"aot_inductor.metadata": metadata})


def load_package(path):
    """``torch._inductor.aoti_load_package(path)`` after loading the ``sru_cpp`` op library that
    a package with the fused kernel calls (else: "Could not find schema for
    sru_cpp::recurrence_forward")."""
    load_op_library()
    return torch._inductor.aoti_load_package(str(path))


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


if __name__ == "__main__":
    sys.exit(main())
