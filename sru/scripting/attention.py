"""``SRUppAttention``'s TorchScript forward (docs/deploy.md#torchscript): the eager maths of
sru/srupp_attention.py (the same linear maps, ``scaled_dot_product_attention``, key padding and
``attn_mask`` as one additive mask) without the argument checks TorchScript cannot compile.
Kept apart from sru/scripting/srupp.py, which needs the attention classes themselves."""
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor


def scripted_attention_mask(tgt_len: int, src_len: int, batch: int, dtype: torch.dtype,
                            device: torch.device, attn_mask: Optional[Tensor],
                            mask_pad: Optional[Tensor],
                            memory_mask_pad: Optional[Tensor]) -> Optional[Tensor]:
    """``sru.srupp_attention.attention_mask`` without its argument checks: (B, 1, tgt, src)."""
    if attn_mask is not None:
        attn_mask = attn_mask.to(dtype)
    if mask_pad is None and memory_mask_pad is None:
        return attn_mask
    pads: List[Tensor] = []
    if src_len > tgt_len:
        pads.append(memory_mask_pad.ne(0) if memory_mask_pad is not None else
                    torch.zeros(src_len - tgt_len, batch, dtype=torch.bool, device=device))
    pads.append(mask_pad.ne(0) if mask_pad is not None else
                torch.zeros(tgt_len, batch, dtype=torch.bool, device=device))
    pad = torch.cat(pads, dim=0).t()  # (B, src)
    key_mask = torch.zeros(pad.shape, dtype=dtype, device=pad.device).masked_fill(pad, float("-inf"))
    key_mask = key_mask.unsqueeze(1).unsqueeze(1)  # (B, 1, 1, src)
    return key_mask if attn_mask is None else key_mask + attn_mask


def _heads(t: Tensor, heads: int) -> Tensor:
    """(T, B, P) -> (B, heads, T, P / heads)."""
    return t.reshape(t.size(0), t.size(1), heads, t.size(2) // heads).permute(1, 2, 0, 3)


class ScriptableAttention:
    """``SRUppAttention``'s TorchScript forward (a mixin)."""

    def _scripted_forward(self, input: Tensor, mask_pad: Optional[Tensor],
                          attn_mask: Optional[Tensor], memory: Optional[Tensor],
                          memory_mask_pad: Optional[Tensor]) -> Tensor:
        z = self.linear1(input if memory is None else torch.cat([memory, input], dim=0))
        mem_len = z.size(0) - input.size(0)
        residual = z[mem_len:]
        norm = self.layer_norm
        if norm is not None and not self.normalize_after:
            z = norm(z)
        kv = self.linear2(z).chunk(2, dim=-1)
        q, k, v = z[mem_len:], kv[0], kv[1]
        mask = scripted_attention_mask(q.size(0), k.size(0), q.size(1), q.dtype, q.device,
                                       attn_mask, mask_pad, memory_mask_pad)
        heads = self.num_heads
        out = F.scaled_dot_product_attention(
            _heads(q, heads), _heads(k, heads), _heads(v, heads), attn_mask=mask,
            dropout_p=self.attn_dropout if self.training else 0.0)
        out = out.permute(2, 0, 1, 3).reshape(q.shape) * self.alpha + residual
        if norm is not None and self.normalize_after:
            out = norm(out)
        return self.linear3(self.dropout(out))
