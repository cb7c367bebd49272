"""``DispatchedLinear``: the one Linear class of every precision. An ``nn.Linear`` whose CPU product goes
through the projection entry point (``sru.ops.linear``: fp32 through MKL or oneDNN, whichever is faster
for the shape; bf16 under autocast; int8 once ``quantize_int8_`` gave it an ``Int8Weight``).

Why a subclass: SRU++'s projections (``sru.srupp_attention``), the LM's output softmax and the
translation model's Linear layers are ``nn.Linear``; as a subclass they keep the same parameters,
state_dict keys and ``isinstance`` answers, and every other dtype, device, autocast, compile and
export runs ``F.linear`` exactly as before.
"""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sru.ops import check_library, linear
from sru.ops.precision import Precision, explicit_float_precision
from sru.ops.quantized import Int8Weight


class DispatchedLinear(nn.Linear):
    """``nn.Linear(in_features, out_features, bias)`` with ``gemm`` = auto / mkl / onednn (a library: the
    precision is the weight's, ``precision``)."""

    __jit_unused_properties__ = ["precision"]  # torch.jit.script: Python only

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None, gemm: str = "auto"):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.gemm = check_library(gemm, "DispatchedLinear")
        self._precision = None  # None: as the surrounding autocast says; BF16: set by sru.to_precision

    def forward(self, input: Tensor) -> Tensor:
        if torch.jit.is_scripting():  # TorchScript compiles only this line (sru/scripting/)
            return F.linear(input, self.weight, self.bias)
        return linear(input, self.weight, self.bias, self.gemm, self._modules.get("weight_int8"), self._precision)

    @property
    def precision(self) -> Precision:
        """INT8 with an int8 weight; else what ``sru.to_precision`` set (BF16), else FP32."""
        if isinstance(self._modules.get("weight_int8"), Int8Weight):
            return Precision.INT8
        return self._precision or Precision.FP32

    @precision.setter
    def precision(self, value) -> None:
        self._precision = explicit_float_precision(value, "DispatchedLinear")

    def quantize_int8_(self) -> "DispatchedLinear":
        """In place: an int8 copy of the weight (submodule ``weight_int8``, per output channel), and the
        weight replaced by its dequantised values (a new tensor: a weight tied to an embedding stays as
        it was), so that every float route computes the same function. Returns self."""
        int8 = Int8Weight.of(self.weight)
        self.weight = nn.Parameter(int8.dequantized().to(self.weight.dtype), requires_grad=False)
        self.weight_int8 = int8
        return self

    def extra_repr(self) -> str:
        shown = [super().extra_repr()]
        if self.gemm != "auto":
            shown.append(f"gemm={self.gemm!r}")
        return ", ".join(shown)

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__.setdefault("gemm", "auto")  # pickles from before the dispatch
        self.__dict__.setdefault("_precision", None)

    @classmethod
    def from_linear(cls, linear: nn.Linear, gemm: str = "auto") -> "DispatchedLinear":
        """The same parameters (shared, not copied) behind the dispatch."""
        out = cls.__new__(cls)
        out.__dict__.update(linear.__dict__)
        out._parameters, out._buffers, out._modules = (dict(linear._parameters), dict(linear._buffers),
                                                       dict(linear._modules))
        out.gemm = check_library(gemm, "DispatchedLinear")
        out._precision = None
        return out


def dispatch_linears(model: nn.Module, gemm: str = "auto") -> nn.Module:
    """Put every plain ``nn.Linear`` of ``model`` behind the GEMM dispatch, in place (parameters
    shared); returns the model. For models built from torch's own layers."""
    for parent in model.modules():
        for name, child in list(parent._modules.items()):
            if type(child) is nn.Linear:
                parent._modules[name] = DispatchedLinear.from_linear(child, gemm)
    return model


__all__ = ["DispatchedLinear", "dispatch_linears"]
