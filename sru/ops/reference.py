"""The SRU elementwise recurrence as a plain PyTorch loop over time.

This is the readable specification of the recurrence (docs/spec.md#forward-recurrence)
and the test oracle for every fused backend. Autograd differentiates it, so it needs no
backward of its own; it works in any floating dtype, float64 included (for gradcheck).
``gate_setup`` and ``cell_step`` are the only statement of the gate set-up and the cell
maths: the export form (sru/ops/export.py) scans ``cell_step`` instead of looping.

Layouts (``dirs`` = 2 when bidirectional, else 1; ``d`` = hidden size per direction; the
kernels' memory layout: docs/spec.md#memory-layout):

    U         (L, B, dirs*d*k)       viewed (L, B, dirs, d, k), k innermost: u0, u1, u2[, u3]
    x         (L, B, dirs*d)         skip input, used only when has_skip_term and k == 3
    weight_c  (2*dirs*d,)            [v_f ; v_r], each viewed (dirs, d)
              or (L, B, dirs*d*2)    per-step gate weights, viewed (L, B, dirs, d, 2)
    bias      (2*dirs*d,)            [b_f ; b_r], each viewed (dirs, d)
    c0        (B, dirs*d)
    mask_c    (B, dirs*d)            time-shared dropout mask on the gated term (already scaled)
    mask_pad  (L, B)                 true / nonzero = padded step
Packed input (sru/ops/packing.py) has rows (N,) in place of (L, B).
"""
from typing import NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from .spec import SKIP_SCALED_X, Masks, RecurrenceSpec, flat_entry


class Gates(NamedTuple):
    """Every recurrence input viewed per direction: U (*rows, dirs, d, k); v_f, v_r (dirs, d)
    or per step (*rows, dirs, d); b_f, b_r (dirs, d); x_skip (*rows, dirs, d) (scaled x, or
    u3, or None without a skip term); c0 and drop (B, dirs, d) (drop None without mask_c)."""

    U: Tensor
    v_f: Tensor
    v_r: Tensor
    b_f: Tensor
    b_r: Tensor
    x_skip: Optional[Tensor]
    c0: Tensor
    drop: Optional[Tensor]


def gate_setup(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor,
               c0: Optional[Tensor], mask_c: Optional[Tensor], spec: RecurrenceSpec,
               batch: int) -> Gates:
    """The gate set-up, once for every path: U's rows are (L, B) padded or (N,) packed."""
    dirs, d, k = spec.dirs, spec.hidden_size, spec.k(U)
    rows = U.shape[:-1]
    U = U.reshape(*rows, dirs, d, k)
    if weight_c.dim() > 1:  # per-step gate weights, laid out (dirs, d, 2)
        w = weight_c.reshape(*rows, dirs, d, 2)
        v_f, v_r = w[..., 0], w[..., 1]
    else:
        v_f, v_r = weight_c.reshape(2, dirs, d)
    b_f, b_r = bias.reshape(2, dirs, d)
    mode = spec.skip_mode(k)
    x_skip = None
    if mode == SKIP_SCALED_X:
        x_skip = x.reshape(*rows, dirs, d) * spec.scale_x
    elif spec.has_skip_term:
        x_skip = U[..., 3]
    c0 = U.new_zeros(batch, dirs, d) if c0 is None else c0.reshape(batch, dirs, d)
    drop = None if mask_c is None else mask_c.reshape(batch, dirs, d)
    return Gates(U, v_f, v_r, b_f, b_r, x_skip, c0, drop)


def cell_step(u: Tensor, c_prev: Tensor, weights: Tuple[Tensor, Tensor, Tensor, Tensor],
              x_t: Optional[Tensor], drop: Optional[Tensor], keep: Optional[Tensor],
              use_tanh: bool) -> Tuple[Tensor, Tensor]:
    """One time step of one direction: ``(c_t, h_t)`` from u_t (..., k), c_{t-1}, the gate
    weights ``(v_f, v_r, b_f, b_r)``, the skip input x'_t (None: no skip term), the dropout
    mask and ``keep`` (1 on real tokens, 0 on padded steps, which keep c and output 0)."""
    v_f, v_r, b_f, b_r = weights
    f = torch.sigmoid(u[..., 1] + v_f * c_prev + b_f)
    r = torch.sigmoid(u[..., 2] + v_r * c_prev + b_r)
    c = f * c_prev + (1 - f) * u[..., 0]
    if keep is not None:  # a padded step keeps the state unchanged
        c = keep * c + (1 - keep) * c_prev
    g = torch.tanh(c) if use_tanh else c
    gated = r if drop is None else r * drop
    h = gated * g if x_t is None else x_t + gated * (g - x_t)
    return c, (h if keep is None else h * keep)


def padded(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor,
           c0: Optional[Tensor], masks: Masks, spec: RecurrenceSpec) -> Tuple[Tensor, Tensor]:
    """Return ``(h, c_last)``: h is (L, B, dirs*d), c_last is (B, dirs*d)."""
    length, batch = U.size(0), U.size(1)
    g = gate_setup(U, x, weight_c, bias, c0, masks.mask_c, spec, batch)
    keep = None
    if masks.mask_pad is not None:
        # 1 on real tokens, 0 on padding; broadcast over hidden units.
        keep = (masks.mask_pad.reshape(length, batch, 1) == 0).to(U.dtype)

    # Per-step views taken once: indexing U[t] inside the loop would make autograd build
    # (and zero-fill) a full-size gradient of U at every step, quadratic in the length.
    U_steps = g.U.unbind(0)
    x_steps = None if g.x_skip is None else g.x_skip.unbind(0)
    per_step = g.v_f.dim() > 2
    v_f, v_r = (g.v_f.unbind(0), g.v_r.unbind(0)) if per_step else (g.v_f, g.v_r)

    h = [[None] * length for _ in range(spec.dirs)]
    c_last = []
    for di in range(spec.dirs):
        c_prev = g.c0[:, di]
        for t in (range(length) if di == 0 else range(length - 1, -1, -1)):
            weights = ((v_f[t][:, di], v_r[t][:, di]) if per_step else (v_f[di], v_r[di])) \
                + (g.b_f[di], g.b_r[di])
            c_prev, h[di][t] = cell_step(
                U_steps[t][:, di], c_prev, weights, None if x_steps is None else x_steps[t][:, di],
                None if g.drop is None else g.drop[:, di], None if keep is None else keep[t],
                spec.use_tanh)
        c_last.append(c_prev)
    h = torch.stack([torch.stack(h[di], dim=0) for di in range(spec.dirs)], dim=2)
    return h.reshape(length, batch, spec.width), torch.stack(c_last, dim=1).reshape(batch, -1)


def packed(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor, c0: Optional[Tensor],
           masks: Masks, spec: RecurrenceSpec, layout) -> Tuple[Tensor, Tensor]:
    """The recurrence over a packed batch (a PackedSequence's time-major layout, described by
    ``layout``, a ``sru.ops.packing.PackedLayout``): step t's rows are the next
    ``batch_sizes[t]`` rows of U (N, dirs*d*k) and x (N, dirs*d), sequences sorted by
    decreasing length, so step t updates the state of the first ``batch_sizes[t]`` sequences
    only. The backward direction of a sequence therefore starts at its own last token (from
    c0), as the padded path does with ``mask_pad``. c0 and mask_c are (B, dirs*d) with
    B = batch_sizes[0], in that sorted order. Returns h (N, dirs*d), c_last (B, dirs*d).
    """
    sizes, batch = layout.sizes, layout.batch
    g = gate_setup(U, x, weight_c, bias, c0, masks.mask_c, spec, batch)
    U_steps = g.U.split(sizes)
    x_steps = None if g.x_skip is None else g.x_skip.split(sizes)
    length = len(sizes)
    h = [[None] * length for _ in range(spec.dirs)]
    c_last = []
    for di in range(spec.dirs):
        state = g.c0[:, di]  # (B, d): rows past a sequence's end (or before its start) stay put
        weights = (g.v_f[di], g.v_r[di], g.b_f[di], g.b_r[di])
        for t in (range(length) if di == 0 else range(length - 1, -1, -1)):
            n = sizes[t]
            c, h[di][t] = cell_step(
                U_steps[t][:, di], state[:n], weights,
                None if x_steps is None else x_steps[t][:, di],
                None if g.drop is None else g.drop[:n, di], None, spec.use_tanh)
            state = c if n == batch else torch.cat([c, state[n:]])
        c_last.append(state)
    h = torch.cat([torch.stack([h[di][t] for di in range(spec.dirs)], dim=1)
                   for t in range(length)])
    return h.reshape(-1, spec.width), torch.stack(c_last, dim=1).reshape(batch, spec.width)


elementwise_recurrence_reference = flat_entry(padded, "elementwise_recurrence_reference")
