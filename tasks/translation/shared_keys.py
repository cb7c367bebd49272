"""The decoder's cached self-attention keys/values in beam search: one row of key columns per sentence, shared
by its K hypotheses (tasks/translation/model.py's decoding state; docs/benchmarks.md, "Beam search's common work").

    cache["k"]: (sentences, heads, columns, head dim); a column holds the key of one hypothesis at one position
    state["columns"]: (sentences x K, positions): the column each hypothesis reads at each of its positions

A step appends K columns per sentence (one per hypothesis, ``append_keys``) and each hypothesis reads its own
columns through a mask (``hypothesis_mask``), so reordering hypotheses moves no keys, where copying every
hypothesis's prefix at every step cost as much as the attention itself. A finished sentence leaves by the last
ones moving into its place, in place (``select_sentences``).

The price is attention over columns no hypothesis reads any more: a hypothesis that is dropped leaves its
columns behind, and after a few steps most of a sentence's K hypotheses descend from one ancestor. On the
default run's test set 29 % of the columns were still read (55 % padded to the batch's widest sentence).
``compact`` drops the unread ones once they are ``COMPACT_SHARE`` of a batch's width: a copy of the read keys
every few steps instead of attending over all of them at every step.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import torch
from torch import Tensor

# Compact once the unread columns are this share of the widest sentence's columns and at least this many steps'
# worth (K each): 600 test sentences in int8 took 5.73-5.84 s so, 5.8-6.0 s with 0.05-0.35 and 1-2 steps, 6.27 s
# never compacting (docs/benchmarks.md)
COMPACT_SHARE = 0.15
COMPACT_MIN_STEPS = 1


def tracked(t: Tensor) -> bool:
    return torch.is_grad_enabled() and t.requires_grad  # in-place buffer writes would break its backward


def append_keys(cache: Dict[str, Tensor], key: str, new: Tensor, group: int = 1) -> None:
    """``cache[key]`` (n, H, C, d) extended by ``new`` (n * group, H, T, d), where ``group`` rows of ``new`` are the
    hypotheses of one sentence: column C + t * group + j holds hypothesis j's key of new position t.
    From the second call (decoding's steps) the keys live in ``cache[key + "_buf"]`` with room to grow (doubled
    when full): a step writes its columns in place instead of copying the prefix into new memory."""
    B, H, T, d = new.shape
    n = B // group
    new = new.view(n, group, H, T, d).permute(0, 2, 3, 1, 4)  # (n, H, T, group, d)
    past = cache.get(key)
    if past is None or tracked(new) or tracked(past):
        new = new.reshape(n, H, T * group, d)
        cache[key] = new if past is None else torch.cat([past, new], 2)
        cache.pop(key + "_buf", None)
        return
    start, end = past.size(2), past.size(2) + T * group
    buf = cache.get(key + "_buf")
    if buf is None or buf.size(2) < end:
        buf = new.new_empty(n, H, max(2 * end, 16 * group), d)
        buf[:, :, :start] = past
    buf[:, :, start:end].view(n, H, T, group, d).copy_(new)
    cache[key + "_buf"], cache[key] = buf, buf[:, :, :end]


def select_sentences(cache: Dict[str, Tensor], key: str, index: Tensor) -> Dict[str, Tensor]:
    """Sentences ``index`` of ``cache[key]`` (n, H, L, d), in place: only the rows whose sentence changes are
    copied, and rows past the new count drop out of the view (their memory stays with the buffer). Beam
    search lets finished sentences leave by moving the last ones into their places (search.py), so a step
    copies a few sentences' keys, not all of them (a fresh copy of every key faults in new memory)."""
    past, n = cache[key], index.numel()
    if tracked(past) or n > past.size(0):
        return {key: past.index_select(0, index)}
    moved = (index != torch.arange(n, device=index.device)).nonzero().squeeze(1)
    if moved.numel():  # every source is read before any row is written: any index is safe
        past.index_copy_(0, moved, past.index_select(0, index[moved]))
    out = {key: past[:n]}
    if key + "_buf" in cache:
        out[key + "_buf"] = cache[key + "_buf"][:n]
    return out


def new_columns(width: int, rows: int, group: int, T: int, device: torch.device) -> Tensor:
    """(rows, T): the columns ``append_keys`` gives the T new positions of each hypothesis row (row b is
    hypothesis b % group of its sentence), after ``width`` columns per sentence."""
    own = (torch.arange(rows, device=device) % group).unsqueeze(1)
    return width + torch.arange(T, device=device) * group + own


def hypothesis_mask(columns: Tensor, group: int, T: int, width: int) -> Tensor:
    """Additive self-attention mask over a sentence's columns: ``columns`` (n * group, P + T), the column each
    hypothesis reads at each position, the last T this call's new ones -> (n, 1, group * T, width), 0 where query
    i of hypothesis j (row j * T + i, Attention's grouped order) reads a column at a position up to its own."""
    rows, length = columns.shape
    n, P = rows // group, length - T
    per_sentence = columns.view(n, group, length)
    allowed = torch.zeros(n, group, T, width, dtype=torch.bool, device=columns.device)
    for i in range(T):  # query i sees positions 0 .. P + i
        allowed[:, :, i].scatter_(2, per_sentence[:, :, :P + i + 1], True)
    return additive(allowed.view(n, 1, group * T, width))


def additive(allowed: Tensor) -> Tensor:
    """A boolean attention mask as the float one scaled_dot_product_attention turns it into (0 / -inf) on every
    call: made once, it serves every decoder layer (and, for the encoder's, every step)."""
    return torch.zeros(allowed.shape, device=allowed.device).masked_fill_(~allowed, float("-inf"))


def compact(columns: Tensor, group: int, width: int, caches: List[Dict[str, Tensor]]) -> Optional[tuple]:
    """Drop the columns no hypothesis reads when they are worth a copy (module docstring): (columns renumbered,
    new width), with every cache's "k" / "v" keeping only the read columns (in order; a sentence with fewer
    keeps some unread ones as padding, which its mask hides); None when not worth it (the caches untouched)."""
    rows, length = columns.shape
    n = rows // group
    if n == 0 or width == 0 or any(tracked(cache["k"]) for cache in caches):
        return None
    read = torch.zeros(n, width, dtype=torch.bool, device=columns.device)
    read.scatter_(1, columns.view(n, group * length), True)
    kept = int(read.sum(1).max())
    if width - kept < max(COMPACT_SHARE * width, COMPACT_MIN_STEPS * group):
        return None
    # per sentence, the read columns first in their order (a stable sort of "unread"), then padding
    keep = torch.sort((~read).to(torch.uint8), dim=1, stable=True).indices[:, :kept]
    renumber = read.long().cumsum(1) - 1  # a read column's place among the kept ones
    for cache in caches:
        for key in ("k", "v"):
            cache[key + "_buf"] = _kept_columns(cache, key, keep)
            cache[key] = cache[key + "_buf"][:, :, :kept]
    return renumber.gather(1, columns.view(n, group * length)).view(rows, length), kept


def _kept_columns(cache: Dict[str, Tensor], key: str, keep: Tensor) -> Tensor:
    """A new buffer (room to grow, as ``append_keys``) holding columns ``keep`` (n, W) of each sentence."""
    buf = cache.get(key + "_buf", cache[key])  # rows of a buffer (contiguous); reshape below copies where not
    n, H, capacity, d = buf.shape
    rows = (torch.arange(n, device=keep.device).unsqueeze(1) * H + torch.arange(H, device=keep.device)) * capacity
    flat = (rows.unsqueeze(2) + keep.unsqueeze(1)).view(-1)  # (n, H, W) rows of buf seen as (n * H * capacity, d)
    W = keep.size(1)
    out = buf.new_empty(n, H, max(2 * W, 16), d)
    out[:, :, :W].copy_(buf.reshape(n * H * capacity, d).index_select(0, flat).view(n, H, W, d))
    return out
