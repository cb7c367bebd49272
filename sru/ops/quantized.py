"""``Int8Weight``: a quantised weight as a value of its own type, a small module holding the int8
weight (out, in) and one float32 scale per output channel as buffers ``q`` and ``scale``.

Why a module: the quantised model's own structure carries it, so ``copy.deepcopy``, pickling,
``state_dict`` / ``load_state_dict``, ``.to()``, TorchScript and export keep it with nothing to
reattach. The layer hands it to the projection entry point (``sru.ops.matmul`` / ``sru.ops.linear``)
as an argument beside the float weight (which then holds the dequantised values, so every float
route computes the same function); the int8 kernels are sru/ops/cpu/int8.py.
"""
from typing import Tuple

import torch
from torch import Tensor, nn


def quantize_weight(weight_out_in: Tensor) -> Tuple[Tensor, Tensor]:
    """Symmetric int8 per output channel: (int8 (out, in), float32 scales (out,))."""
    w = weight_out_in.detach().float()
    scale = w.abs().amax(dim=1).clamp_min(1e-12) / 127.0
    return torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8), scale


class Int8Weight(nn.Module):
    """int8 ``q`` (out, in) and float32 ``scale`` (out,): the weight is ``q * scale[:, None]``."""

    def __init__(self, q: Tensor, scale: Tensor):
        super().__init__()
        self.register_buffer("q", q)
        self.register_buffer("scale", scale)

    @classmethod
    def of(cls, weight_out_in: Tensor) -> "Int8Weight":
        """The quantised copy of a float weight stored (out, in)."""
        return cls(*quantize_weight(weight_out_in)).to(weight_out_in.device)

    def pair(self) -> Tuple[Tensor, Tensor]:
        """(q, scale), read without ``nn.Module.__getattr__`` (asked before every int8 product)."""
        buffers = self._buffers
        return buffers["q"], buffers["scale"]

    def dequantized(self) -> Tensor:
        """``q * scale`` (out, in) in float32."""
        q, scale = self.pair()
        return q.float() * scale.float()[:, None]

    def extra_repr(self) -> str:
        return f"out_features={self.q.shape[0]}, in_features={self.q.shape[1]}, int8 per-channel"


__all__ = ["Int8Weight", "quantize_weight"]
