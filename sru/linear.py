"""``DispatchedLinear``: an ``nn.Linear`` whose float32 CPU product goes through the SRU's CPU GEMM
dispatch (MKL or oneDNN, whichever is faster for the shape: sru/ops/cpu/gemm.py).

Why a subclass: SRU++'s projections (``sru.srupp_attention``), the LM's output softmax and the
translation model's Linear layers are ``nn.Linear``; as a subclass they keep the same parameters,
state_dict keys and ``isinstance`` answers, and every other dtype, device, autocast, compile and
export runs ``F.linear`` exactly as before.
"""
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sru.ops.cpu import gemm as cpu_gemm


class DispatchedLinear(nn.Linear):
    """``nn.Linear(in_features, out_features, bias)`` with ``gemm`` = auto / mkl / onednn."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None, gemm: str = "auto"):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.gemm = cpu_gemm.check_library(gemm, "DispatchedLinear")

    def forward(self, input: Tensor) -> Tensor:
        if torch.jit.is_scripting():  # TorchScript compiles only this line (sru/scripting/)
            return F.linear(input, self.weight, self.bias)
        return cpu_gemm.linear(input, self.weight, self.bias, self.__dict__.get("gemm", "auto"))

    def extra_repr(self) -> str:
        gemm = self.__dict__.get("gemm", "auto")
        return super().extra_repr() + ("" if gemm == "auto" else f", gemm={gemm!r}")

    @classmethod
    def from_linear(cls, linear: nn.Linear, gemm: str = "auto") -> "DispatchedLinear":
        """The same parameters (shared, not copied) behind the dispatch."""
        out = cls.__new__(cls)
        out.__dict__.update(linear.__dict__)
        out._parameters = dict(linear._parameters)
        out.gemm = cpu_gemm.check_library(gemm, "DispatchedLinear")
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
