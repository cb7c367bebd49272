"""SRU++ (``sru.SRUpp``) as a shared encoder, with Transformer-XL-style segment memory.

State between calls is ``(c, memory)``: c (layers, B, d) and per layer the inputs of the most
recent positions (``memory``, a tuple of (M, B, d_in) tensors), which the next call's attention
also sees, as in the official SRU++ language-model scripts (``memory = saved_inputs``). A causal
encoder (``causal=True``: language models) masks attention to the future; the memory is
always in the past. ``mem_len`` keeps that many most recent positions (null: exactly the
previous call's positions, as the official scripts do; 0: no memory). The LM task detaches
the state at every BPTT window (truncated BPTT), memory included.

``step`` decodes one position at a time through ``SRUpp.decode`` (a key/value cache, no
recomputation); its state is an ``sru.SRUppCache`` (a ``(c, memory)`` state is converted).
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor, nn

from tasks.common.rnn_encoders import check_input, reorder_state


class SRUppEncoder(nn.Module):
    """SRU++ with segment memory (module docstring). ``layer_args``: ``sru.SRUpp``'s own arguments
    (conf/model/srupp.yaml; the schema reads them from SRUpp's signature), passed through as they are, except
    ``proj_size``, whose 0 here means hidden_size / 4."""

    def __init__(self, input_size: int, hidden_size: int, proj_size: int = 0, mem_len: Optional[int] = None,
                 causal: bool = False, **layer_args: Any):
        super().__init__()
        from sru import SRUpp
        check_mem_len(mem_len)
        self.input_size = input_size
        self.mem_len = mem_len
        self.causal = causal
        self.rnn = SRUpp(input_size, hidden_size, proj_size or max(hidden_size // 4, 1), **layer_args)
        self.num_layers, self.bidirectional = self.rnn.num_layers, bool(self.rnn.bidirectional)
        self.output_size = self.rnn.output_size

    def _attn_mask(self, length: int, mem_len: int, like: Tensor) -> Optional[Tensor]:
        if not self.causal:
            return None
        hidden = torch.ones(length, mem_len + length, dtype=torch.bool, device=like.device).triu(mem_len + 1)
        return torch.zeros(hidden.shape, dtype=like.dtype, device=like.device).masked_fill(hidden, float("-inf"))

    def forward(self, x: Tensor, state: Any = None, mask_pad: Optional[Tensor] = None,
                return_all_layers: bool = False):
        check_input(x, self.input_size, "SRU++ encoder")
        c0, memory = (None, None) if state is None else state
        if memory is not None and mask_pad is not None:
            raise ValueError("SRU++ encoder: segment memory with padded batches is not supported; "
                             "pass mask_pad only without a carried state (or set model.mem_len=0)")
        mem_len = 0 if memory is None else memory[0].size(0)
        h, c, saved = self.rnn(x, c0, mask_pad=mask_pad, attn_mask=self._attn_mask(x.size(0), mem_len, x),
                               memory=None if memory is None else list(memory))
        new_state = (c, next_memory(memory, saved["saved_inputs"], self.mem_len))
        if return_all_layers:  # layer i's output is layer i+1's input
            return saved["saved_inputs"][1:] + [h], new_state
        return h, new_state

    def step(self, x_t: Tensor, state: Any = None):
        """One position: x_t (B, D) -> (h_t (B, output_size), cache). Eval mode, no grad."""
        from sru import SRUppCache
        if self.bidirectional or not self.causal:
            raise ValueError("step(): needs a causal, unidirectional SRU++ encoder (a causal task, "
                             "model.bidirectional=false)")
        if state is not None and not isinstance(state, SRUppCache):  # a forward's (c, memory)
            c, memory = state
            state = (self.rnn.cache_from_memory(list(memory), c) if memory is not None else
                     _fill_empty(self.rnn, SRUppCache([None] * self.num_layers,
                                                      [None] * self.num_layers, c), x_t))
        return self.rnn.decode(x_t, state, max_context=self.mem_len or None)

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        from sru import SRUppCache
        if isinstance(state, SRUppCache):
            return state.select(index.to(state.c.device))
        if state is None:
            return None
        c, memory = state
        return (reorder_state(c, index), None if memory is None else reorder_state(memory, index))


def check_mem_len(mem_len: Any) -> None:
    if mem_len is not None and (not isinstance(mem_len, int) or mem_len < 0):
        raise ValueError(f"model.mem_len: expected null (the previous segment) or an int >= 0, received {mem_len!r}")


def next_memory(memory, inputs, mem_len: Optional[int]) -> Optional[Tuple[Tensor, ...]]:
    """The segment memory after a call: per layer its latest inputs (mem_len null), the last mem_len positions
    of memory + inputs (mem_len N), or none (mem_len 0). Shared with the Transformer LM encoder."""
    if mem_len == 0:
        return None
    if mem_len is None or memory is None:
        kept = inputs
    else:
        kept = [torch.cat([m, x]) for m, x in zip(memory, inputs)]
    if mem_len is not None:
        kept = [k[-mem_len:] for k in kept]
    return tuple(kept)


def _fill_empty(rnn, cache, like: Tensor):
    """Empty key/value tensors for attention layers whose cache entry is None."""
    from sru import SRUppAttention, SRUppCache
    keys, values = list(cache.keys), list(cache.values)
    for i, cell in enumerate(rnn.rnn_lst):
        if isinstance(cell.transform_module, SRUppAttention) and keys[i] is None:
            keys[i] = like.new_zeros(0, like.size(0), rnn.proj_size)
            values[i] = keys[i].clone()
    return SRUppCache(keys, values, cache.c)
