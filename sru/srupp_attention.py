"""The two modules that compute SRU++'s U: ``SRUppAttention`` and ``SRUppProjectedLinear``.

SRU++ (Lei, "When Attention Meets Fast Recurrence", EMNLP 2021, arXiv 2102.12459) replaces the
SRU's one matrix product U = x W by a small attention block in a projected space:

    z = x W1                                  (L, B, proj)       linear1
    q = z, [k ; v] = z W2                     (L or M+L, B, proj) linear2, over [memory ; x]
    a = softmax(q k^T / sqrt(head_dim) + attn_mask) v                 (per head)
    U = LayerNorm(alpha * a + z) W3            (L, B, out)         linear3

``SRUppProjectedLinear`` is the same block without the attention (U = LN(x W1) W3), used by
layers that have no attention (``attention_every_n_layers`` / ``attention_last_n_layers``).

Constructor arguments, defaults and parameter names are those of the official
``sru==3.0.0.dev6`` package, so its state_dicts load unchanged. The attention itself runs
through ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels where PyTorch has
them). The pieces of ``SRUppAttention.forward`` are separate methods so that step decoding
(``sru.srupp_decode``) can reuse them with cached keys and values.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sru.linear import DispatchedLinear  # nn.Linear through the CPU GEMM dispatch
from sru.scripting.attention import ScriptableAttention


def _shape(t) -> tuple:
    return tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__


class SRUppProjectedLinear(nn.Module):
    """U = LN(x W1) W3: the transform of SRU++ layers without attention."""

    def __init__(self, in_features: int, out_features: int, proj_features: int,
                 dropout: float = 0.0, layer_norm: bool = False):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.proj_features = proj_features
        self.dropout = nn.Dropout(dropout)
        self.linear1 = DispatchedLinear(in_features, proj_features, bias=False)
        self.linear2 = DispatchedLinear(proj_features, out_features, bias=False)
        self.layer_norm = nn.LayerNorm(proj_features) if layer_norm else None  # Optional[LayerNorm]
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        nn.init.xavier_uniform_(self.linear1.weight)
        nn.init.xavier_uniform_(self.linear2.weight)
        if self.dropout.p > 0:  # keep U's variance under the dropout before linear2
            self.linear2.weight.mul_((1 - self.dropout.p) ** 0.5)

    def forward(self, input: Tensor, mask_pad: Optional[Tensor] = None,
                attn_mask: Optional[Tensor] = None, memory: Optional[Tensor] = None,
                memory_mask_pad: Optional[Tensor] = None) -> Tensor:
        # The attention arguments are accepted (the cell passes them to every layer) and unused:
        # a layer without attention sees only its own position.
        z = self.linear1(input)
        if self.layer_norm is not None:
            z = self.layer_norm(z)
        return self.linear2(self.dropout(z))


class SRUppAttention(ScriptableAttention, nn.Module):
    """U from multi-head self-attention over [memory ; input] in a ``proj_features`` space."""

    def __init__(self, in_features: int, out_features: int, proj_features: int,
                 num_heads: int = 1, dropout: float = 0.0, attn_dropout: float = 0.0,
                 rezero_init_alpha: float = 0.0, layer_norm: bool = False,
                 normalize_after: bool = True):
        super().__init__()
        if not isinstance(num_heads, int) or num_heads < 1 or proj_features % num_heads != 0:
            raise ValueError(f"SRUppAttention expected num_heads to be a positive int dividing "
                             f"proj_features={proj_features}, got num_heads={num_heads!r}")
        self.in_features = in_features
        self.out_features = out_features
        self.proj_features = proj_features
        self.num_heads = num_heads
        self.dropout = nn.Dropout(dropout)
        self.attn_dropout = float(attn_dropout)
        self.rezero_init_alpha = float(rezero_init_alpha)
        self.linear1 = DispatchedLinear(in_features, proj_features, bias=False)
        self.linear2 = DispatchedLinear(proj_features, proj_features * 2, bias=False)
        self.linear3 = DispatchedLinear(proj_features, out_features, bias=False)
        # ReZero: the attention starts switched off (alpha = 0) and is learned in.
        self.alpha = nn.Parameter(torch.tensor([self.rezero_init_alpha]))
        self.normalize_after = normalize_after
        self.layer_norm = nn.LayerNorm(proj_features) if layer_norm else None  # Optional[LayerNorm]
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        for linear in (self.linear1, self.linear2, self.linear3):
            nn.init.xavier_uniform_(linear.weight)
        self.alpha.fill_(self.rezero_init_alpha)
        if self.dropout.p > 0:
            self.linear3.weight.mul_((1 - self.dropout.p) ** 0.5)

    def query_key_value(self, input: Tensor, memory: Optional[Tensor] = None
                        ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """(q, k, v, residual): q and residual (L, B, proj) for the input positions, k and v
        (M+L, B, proj) for [memory ; input]. All of it is per position, which is what lets a
        decoder cache k and v."""
        if memory is not None:
            if (not isinstance(memory, Tensor) or memory.dim() != 3
                    or memory.shape[1:] != input.shape[1:]):
                raise ValueError(f"SRUppAttention expected memory of shape (memory_length, "
                                 f"{input.size(1)}, {input.size(2)}) (the previous segment's "
                                 f"input to this layer), got {_shape(memory)}")
            z = self.linear1(torch.cat([memory, input], dim=0))
        else:
            z = self.linear1(input)
        mem_len = z.size(0) - input.size(0)
        residual = z[mem_len:]
        if self.layer_norm is not None and not self.normalize_after:
            z = self.layer_norm(z)
        k, v = self.linear2(z).chunk(2, dim=-1)
        return z[mem_len:], k, v, residual

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor]) -> Tensor:
        """Multi-head attention, (L, B, proj) queries over (S, B, proj) keys/values -> (L, B, proj).
        mask: additive float, broadcastable to (B, heads, L, S), or None."""
        heads, head_dim = self.num_heads, self.proj_features // self.num_heads

        def split(t: Tensor) -> Tensor:  # (T, B, P) -> (B, heads, T, head_dim)
            return t.reshape(t.size(0), t.size(1), heads, head_dim).permute(1, 2, 0, 3)

        out = F.scaled_dot_product_attention(
            split(q), split(k), split(v), attn_mask=mask,
            dropout_p=self.attn_dropout if self.training else 0.0)
        return out.permute(2, 0, 1, 3).reshape(q.shape)

    def output(self, attended: Tensor, residual: Tensor) -> Tensor:
        """U = LN(alpha * attention + residual) W3."""
        out = attended * self.alpha + residual
        if self.layer_norm is not None and self.normalize_after:
            out = self.layer_norm(out)
        return self.linear3(self.dropout(out))

    def forward(self, input: Tensor, mask_pad: Optional[Tensor] = None,
                attn_mask: Optional[Tensor] = None, memory: Optional[Tensor] = None,
                memory_mask_pad: Optional[Tensor] = None) -> Tensor:
        """input (L, B, in); mask_pad (L, B) and memory_mask_pad (M, B), nonzero = padded key;
        attn_mask (L, M+L) additive float (e.g. -inf above the causal diagonal); memory
        (M, B, in). Returns U (L, B, out)."""
        if torch.jit.is_scripting():  # a constant to TorchScript (sru/scripting/srupp.py)
            return self._scripted_forward(input, mask_pad, attn_mask, memory, memory_mask_pad)
        q, k, v, residual = self.query_key_value(input, memory)
        mask = attention_mask(q.size(0), k.size(0), q.size(1), q.dtype, attn_mask,
                              mask_pad, memory_mask_pad)
        return self.output(self.attend(q, k, v, mask), residual)


def attention_mask(tgt_len: int, src_len: int, batch: int, dtype: torch.dtype,
                   attn_mask: Optional[Tensor], mask_pad: Optional[Tensor],
                   memory_mask_pad: Optional[Tensor]) -> Optional[Tensor]:
    """One additive float mask for scaled_dot_product_attention: attn_mask (tgt, src) plus
    -inf on padded keys ([memory_mask_pad ; mask_pad], (src, B)), as (B, 1, tgt, src); or None."""
    mem_len = src_len - tgt_len
    if attn_mask is not None:
        if not isinstance(attn_mask, Tensor) or _shape(attn_mask) != (tgt_len, src_len):
            raise ValueError(f"SRU++ expected attn_mask of shape (input_length, memory_length + "
                             f"input_length) = {(tgt_len, src_len)}, got {_shape(attn_mask)}")
        if not attn_mask.is_floating_point():
            raise ValueError("SRU++ expected attn_mask to be an additive float mask (0 where "
                             "attending, -inf where not), as in the official package; got dtype "
                             f"{attn_mask.dtype}; e.g. pass torch.zeros(...).masked_fill(m, "
                             "float('-inf'))")
        attn_mask = attn_mask.to(dtype)
    if mask_pad is None and memory_mask_pad is None:
        return attn_mask
    pads = []
    if mem_len > 0:
        if memory_mask_pad is not None and _shape(memory_mask_pad) != (mem_len, batch):
            raise ValueError(f"SRU++ expected memory_mask_pad of shape (memory_length, batch) = "
                             f"{(mem_len, batch)}, got {_shape(memory_mask_pad)}")
        pads.append(memory_mask_pad.ne(0) if memory_mask_pad is not None
                    else torch.zeros(mem_len, batch, dtype=torch.bool, device=_device(mask_pad, memory_mask_pad)))
    pads.append(mask_pad.ne(0) if mask_pad is not None
                else torch.zeros(tgt_len, batch, dtype=torch.bool, device=memory_mask_pad.device))
    pad = torch.cat(pads, dim=0).t()  # (B, src)
    key_mask = torch.zeros(pad.shape, dtype=dtype, device=pad.device).masked_fill(pad, float("-inf"))
    key_mask = key_mask[:, None, None, :]  # (B, 1, 1, src)
    return key_mask if attn_mask is None else key_mask + attn_mask


def _device(*tensors) -> torch.device:
    return next(t.device for t in tensors if t is not None)
