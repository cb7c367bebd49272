"""What an exported program or an AOTInductor package of an SRU model checks on every call.

A compiled package reads its input by the shapes it was compiled for: a wrong width reads out of
bounds (NaN or garbage), a 2-D input crashes the process. ``InputSpec`` is the input a program
was exported from (width, layout, dtype, device); ``CheckedPackage`` (what
``sru.deploy.load_package`` returns) and ``checked_program`` (``sru.deploy.export``) check each
input against it first and raise one ValueError naming the expected shape. An empty batch
(length or batch 0) is refused the same way: the dynamic shapes start at 1.
"""
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch
from torch import Tensor

MAX_LENGTH, MAX_BATCH = 1 << 16, 1 << 14  # the dynamic shapes' upper bounds


@dataclass(frozen=True)
class InputSpec:
    width: int
    batch_first: bool = False
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    sizes: Optional[Tuple[int, int]] = None  # the example's first two sizes, when exported with dynamic=False

    @classmethod
    def of(cls, example: Tensor, batch_first: bool, dynamic: bool = True) -> "InputSpec":
        if not isinstance(example, Tensor) or example.dim() != 3:
            got = tuple(example.shape) if isinstance(example, Tensor) else type(example).__name__
            dims = "batch, length" if batch_first else "length, batch"
            raise ValueError(f"sru.deploy.export: expected an example input of shape ({dims}, input_size), "
                             f"got {got}")
        sizes = None if dynamic else (int(example.shape[0]), int(example.shape[1]))
        return cls(int(example.shape[-1]), bool(batch_first), example.dtype, example.device.type, sizes)

    @classmethod
    def from_metadata(cls, metadata: dict, path) -> "InputSpec":
        """A package's metadata (``metadata()``); packages compiled before these keys existed
        took float32 on CPU, time-major."""
        if not str(metadata.get("sru_input_size", "")).isdigit():
            raise ValueError(f"sru.deploy.load_package: {path} has no sru_input_size in its metadata; "
                             "compile it with sru.deploy.compile_package")
        dtype = getattr(torch, metadata.get("sru_dtype", "float32"), torch.float32)
        fixed = metadata.get("sru_fixed_sizes", "")
        sizes = tuple(int(n) for n in fixed.split(",")) if fixed else None
        return cls(int(metadata["sru_input_size"]), metadata.get("sru_batch_first") == "1", dtype,
                   metadata.get("sru_device", "cpu"), sizes)

    def metadata(self) -> dict:
        return {"sru_input_size": str(self.width), "sru_batch_first": "1" if self.batch_first else "0",
                "sru_dtype": str(self.dtype).replace("torch.", ""), "sru_device": self.device,
                "sru_fixed_sizes": ",".join(str(n) for n in self.sizes) if self.sizes else ""}

    def shape(self) -> str:
        return f"({'batch, length' if self.batch_first else 'length, batch'}, {self.width})"

    def check(self, owner: str, x) -> None:
        """One ValueError naming what ``owner`` expected and what it got."""
        if not isinstance(x, Tensor):
            raise ValueError(f"{owner} expected a tensor of shape {self.shape()}, got {type(x).__name__}")
        self._check_shape(owner, tuple(x.shape))
        if x.dtype != self.dtype:
            raise ValueError(f"{owner} expected input of dtype {self.dtype}, got {x.dtype}; convert it with "
                             f"x.to({self.dtype})")
        if x.device.type != self.device:
            raise ValueError(f"{owner} expected input on {self.device}, got {x.device}; move it with "
                             f"x.to({self.device!r})")
        self._check_sizes(owner, tuple(x.shape))

    def check_array(self, owner: str, x, why: str = "its dynamic shapes start at 1") -> None:
        """``check`` for a numpy array, what ONNX Runtime's ``session.run`` takes."""
        if not isinstance(x, np.ndarray):
            hint = "; pass x.numpy()" if isinstance(x, Tensor) else ""
            raise ValueError(f"{owner} expected a numpy array of shape {self.shape()}, got {type(x).__name__}{hint}")
        self._check_shape(owner, tuple(x.shape))
        want = np.dtype(str(self.dtype).replace("torch.", ""))
        if x.dtype != want:
            raise ValueError(f"{owner} expected input of dtype {want}, got {x.dtype}; convert it with "
                             f"x.astype(numpy.{want})")
        self._check_sizes(owner, tuple(x.shape), why)

    def _check_shape(self, owner: str, got: tuple) -> None:
        if len(got) != 3 or got[-1] != self.width:
            raise ValueError(f"{owner} expected input of shape {self.shape()}, got {got}")
        if self.sizes is not None and tuple(got[:2]) != self.sizes:
            raise ValueError(f"{owner} expected input of shape {self.sizes + (self.width,)} (exported with "
                             f"dynamic=False: these sizes only), got {got}; export with dynamic=True for other "
                             "lengths and batches")

    def _check_sizes(self, owner: str, got: tuple, why: str = "its dynamic shapes start at 1") -> None:
        length, batch = (got[1], got[0]) if self.batch_first else got[:2]
        if length == 0 or batch == 0:
            raise ValueError(f"{owner} expected input of shape {self.shape()} with length and batch >= 1 ({why}), "
                             f"got {got}; skip an empty batch (eager returns empty outputs for it)")
        if length > MAX_LENGTH or batch > MAX_BATCH:
            raise ValueError(f"{owner} expected input of shape {self.shape()} with length in [1, {MAX_LENGTH}] "
                             f"and batch in [1, {MAX_BATCH}], got {got}")


class CheckedPackage:
    """An AOTInductor package runner (``torch._inductor.aoti_load_package``) that checks each
    input first; everything else (``get_metadata``, ...) is the runner's."""

    def __init__(self, runner, spec: InputSpec):
        self.runner, self.spec = runner, spec

    def __call__(self, input, *args, **kwargs):
        self.spec.check("sru package", input)
        return self.runner(input, *args, **kwargs)

    def __getattr__(self, name):
        if name in ("runner", "spec"):  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.runner, name)


def checked_program(program, spec: InputSpec):
    """``program`` whose ``module()`` checks each input first (a forward pre-hook); torch's own
    checks of a loaded program (``torch.export.load``) cover the shape only."""
    module = program.module

    def checked_module(*args, **kwargs):
        graph_module = module(*args, **kwargs)
        graph_module.register_forward_pre_hook(lambda _, inputs: spec.check("exported program", inputs[0]),
                                               prepend=True)  # before torch's own check of the input tree
        return graph_module

    program.module = checked_module
    return program
