"""Variable-length input for ``sru.SRU`` without padded compute.

Two entries (docs/sru.md, "Packed input"):

- ``SRU(...)(packed)`` with a ``torch.nn.utils.rnn.PackedSequence`` (``forward_packed_sequence``);
- ``SRU.forward_varlen(tokens, cu_seqlens)`` (``forward_varlen``): the sequences concatenated
  one after another (N, input_size) with their offsets ``cu_seqlens`` (B + 1,), the convention
  of flash-attention and flash-linear-attention.

Both run each layer's own body, ``SRUCell.forward_layout``, over the packed time-major layout
(``sru.ops.packing.PackedLayout``; a padded batch is the trivial layout of the same body): the matmul over
the N real tokens only, the recurrence with step t touching the ``batch_sizes[t]`` sequences still
running. This file keeps only what is packed-specific: the layouts of PackedSequence and cu_seqlens input,
the sorted order of c0 and c, and the stack's loop over its layers. A bidirectional layer starts each
sequence's backward direction at its last real token. What still pads: a ``custom_m`` layer (its module may expect (L, B, d) input), handled by
padding the PackedSequence and passing ``mask_pad``, as before.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from sru.checks import check_float_tensor, shape_of
from sru.forward_routes import choose_route
from sru.ops.packing import PackedLayout


def packed_supported(sru) -> bool:
    """Whether every layer can run packed: a ``custom_m`` module sees (L, B, d) tensors."""
    return all(cell.custom_m is None for cell in sru.rnn_lst)


def stack_forward_packed(sru, data: Tensor, layout: PackedLayout,
                         c0: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """Every layer over packed rows data (N, input_size); c0 (layers, B, dirs*d) sorted order.
    Returns h (N, dirs*d) and c (layers, B, dirs*d) in the sorted order."""
    check_float_tensor("input", "SRU", data)
    if data.dim() != 2 or data.size(1) != sru.input_size:
        raise ValueError(f"SRU expected packed data of shape (tokens, {sru.input_size}), "
                         f"got {shape_of(data)}")
    if c0 is not None:
        check_float_tensor("c0", "SRU", c0)
        expected = (sru.num_layers, layout.batch, sru.output_size)
        if shape_of(c0) != expected:
            raise ValueError(f"SRU expected c0 of shape (num_layers, batch, directions*hidden_size)"
                             f" = {expected}, got {shape_of(c0)}")
    h = data if sru.input_to_hidden is None else sru.input_to_hidden(data)
    c_last = []
    for i, cell in enumerate(sru.rnn_lst):
        c0_i = None if c0 is None else c0[i]
        h, c = cell.forward_layout(h, c0_i, layout, choose_route(cell, h, c0_i, layout=layout)[0])
        c_last.append(c)
    return h, torch.stack(c_last)


def _rnn_compatible(sru, c: Tensor) -> Tensor:
    """(layers, B, dirs*d) -> (layers*dirs, B, d) with nn_rnn_compatible_return."""
    if not sru.nn_rnn_compatible_return:
        return c
    batch = c.size(1)
    return (c.view(sru.num_layers, batch, sru.num_directions, sru.hidden_size)
            .transpose(1, 2).reshape(-1, batch, sru.hidden_size))


def forward_packed_sequence(sru, packed: PackedSequence, c0: Optional[Tensor],
                            mask_pad: Optional[Tensor]) -> Tuple[PackedSequence, Tensor]:
    """``SRU.forward`` for a PackedSequence: c0 and the returned c in the original batch order
    (as ``nn.LSTM``: ``sorted_indices`` maps them), h a PackedSequence like the input."""
    if mask_pad is not None:
        raise ValueError("SRU expected mask_pad=None with a PackedSequence input "
                         "(its lengths already define the padding)")
    if not packed_supported(sru):  # padded compute, masked: see the module docstring
        padded, lengths = pad_packed_sequence(packed)  # (L, B, D), original batch order
        mask = (torch.arange(padded.size(0)).unsqueeze(1) >= lengths.unsqueeze(0))
        h, c = sru(padded, c0, mask_pad=mask.to(padded.device))
        return pack_padded_sequence(h, lengths, enforce_sorted=False), c
    layout = PackedLayout(packed.batch_sizes, packed.data.device)
    if c0 is not None and packed.sorted_indices is not None and c0.dim() == 3 \
            and c0.size(1) == layout.batch:
        c0 = c0.index_select(1, packed.sorted_indices)
    h, c = stack_forward_packed(sru, packed.data, layout, c0)
    if packed.unsorted_indices is not None:
        c = c.index_select(1, packed.unsorted_indices)
    return packed._replace(data=h), _rnn_compatible(sru, c)


def varlen_layout(cu_seqlens: Tensor, tokens: int, device) -> Tuple[PackedLayout, Tensor, Tensor]:
    """The packed layout of sequences stored one after another with offsets ``cu_seqlens``:
    (layout, gather (N,): the token row of each packed row, sorted_indices (B,))."""
    if not isinstance(cu_seqlens, Tensor) or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2 \
            or cu_seqlens.is_floating_point():
        got = shape_of(cu_seqlens) if isinstance(cu_seqlens, Tensor) else type(cu_seqlens).__name__
        raise ValueError(f"SRU expected cu_seqlens as a 1-D integer tensor (batch + 1,) of "
                         f"offsets [0, len0, len0+len1, ...], got {got}")
    cu = cu_seqlens.detach().to("cpu", torch.int64)
    lengths = cu[1:] - cu[:-1]
    if cu[0] != 0 or cu[-1] != tokens or bool((lengths < 1).any()):
        raise ValueError(f"SRU expected cu_seqlens to start at 0, end at the number of tokens "
                         f"({tokens}) and grow strictly (every sequence >= 1 token; drop empty "
                         f"ones), got {cu.tolist()}")
    sorted_lengths, sorted_indices = lengths.sort(descending=True, stable=True)
    steps = torch.arange(int(sorted_lengths[0]))
    batch_sizes = (sorted_lengths.unsqueeze(0) > steps.unsqueeze(1)).sum(1)
    layout = PackedLayout(batch_sizes, device)
    row_batch = layout.row_batch.cpu()
    step_of_row = torch.repeat_interleave(steps, batch_sizes)
    gather = cu[:-1][sorted_indices][row_batch] + step_of_row
    return layout, gather.to(device), sorted_indices


def forward_varlen(sru, tokens: Tensor, cu_seqlens: Tensor,
                   c0: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """``SRU.forward_varlen``: tokens (N, input_size), sequence i being rows
    ``cu_seqlens[i]:cu_seqlens[i+1]``; c0 (layers, B, dirs*d). Returns h (N, dirs*d) in the same
    row order and c (layers, B, dirs*d) (each sequence's state after its last token)."""
    check_float_tensor("tokens", "SRU.forward_varlen", tokens)
    if tokens.dim() != 2:
        raise ValueError(f"SRU.forward_varlen expected tokens of shape (tokens, "
                         f"{sru.input_size}), got {shape_of(tokens)}")
    if not packed_supported(sru):
        raise ValueError("SRU.forward_varlen needs layers without custom_m (its module takes "
                         "(L, B, d) input): pass a padded batch with mask_pad instead")
    layout, gather, sorted_indices = varlen_layout(cu_seqlens, tokens.size(0), tokens.device)
    if c0 is not None and c0.dim() == 3 and c0.size(1) == layout.batch:
        c0 = c0.index_select(1, sorted_indices.to(c0.device))
    h, c = stack_forward_packed(sru, tokens.index_select(0, gather), layout, c0)
    scatter = torch.empty_like(gather)
    scatter[gather] = torch.arange(gather.numel(), device=gather.device)
    unsort = torch.empty_like(sorted_indices)
    unsort[sorted_indices] = torch.arange(sorted_indices.numel())
    return h.index_select(0, scatter), _rnn_compatible(sru, c.index_select(1, unsort.to(c.device)))
