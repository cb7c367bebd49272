"""The SRU elementwise recurrence as a plain PyTorch loop over time.

This is the readable specification of the recurrence (docs/spec.md#forward-recurrence)
and the test oracle for every fused backend. Autograd differentiates it, so it needs no
backward of its own; it works in any floating dtype, float64 included (for gradcheck).

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
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor
from .shapes import num_directions


def elementwise_recurrence_reference(
    U: Tensor,
    x: Optional[Tensor],
    weight_c: Tensor,
    bias: Tensor,
    c0: Optional[Tensor],
    hidden_size: int,
    bidirectional: bool = False,
    has_skip_term: bool = True,
    scale_x: float = 1.0,
    activation: str = "none",
    mask_c: Optional[Tensor] = None,
    mask_pad: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor]:
    """Return ``(h, c_last)``: h is (L, B, dirs*d), c_last is (B, dirs*d)."""
    dirs = num_directions(bidirectional)
    d = hidden_size
    length, batch = U.size(0), U.size(1)
    k = U.size(-1) // (dirs * d)
    U = U.reshape(length, batch, dirs, d, k)

    per_step_weights = weight_c.dim() > 1
    if per_step_weights:
        w = weight_c.reshape(length, batch, dirs, d, 2)
        v_f, v_r = w[..., 0], w[..., 1]          # (L, B, dirs, d)
    else:
        v_f, v_r = weight_c.reshape(2, dirs, d)  # (dirs, d) each
    b_f, b_r = bias.reshape(2, dirs, d)

    if not has_skip_term:
        x_skip = None
    elif k == 3:
        x_skip = x.reshape(length, batch, dirs, d) * scale_x
    else:
        x_skip = U[..., 3]

    if c0 is None:
        c0 = U.new_zeros(batch, dirs * d)
    c0 = c0.reshape(batch, dirs, d)
    keep = None
    if mask_pad is not None:
        # 1 on real tokens, 0 on padding; broadcast over hidden units.
        keep = (mask_pad.reshape(length, batch, 1) == 0).to(U.dtype)
    drop = None if mask_c is None else mask_c.reshape(batch, dirs, d)

    # Per-step views taken once: indexing U[t] inside the loop would make autograd build
    # (and zero-fill) a full-size gradient of U at every step, quadratic in the length.
    U_steps = U.unbind(0)
    x_steps = None if x_skip is None else x_skip.unbind(0)
    if per_step_weights:
        v_f, v_r = v_f.unbind(0), v_r.unbind(0)

    h = [[None] * length for _ in range(dirs)]
    c_last = []
    for di in range(dirs):
        steps = range(length) if di == 0 else range(length - 1, -1, -1)
        c_prev = c0[:, di]
        for t in steps:
            vf = v_f[t][:, di] if per_step_weights else v_f[di]
            vr = v_r[t][:, di] if per_step_weights else v_r[di]
            u = U_steps[t][:, di]
            f = torch.sigmoid(u[..., 1] + vf * c_prev + b_f[di])
            r = torch.sigmoid(u[..., 2] + vr * c_prev + b_r[di])
            c = f * c_prev + (1 - f) * u[..., 0]
            if keep is not None:  # a padded step keeps the state unchanged
                c = keep[t] * c + (1 - keep[t]) * c_prev
            g = torch.tanh(c) if activation == "tanh" else c
            gated = r if drop is None else r * drop[:, di]
            if x_steps is None:
                h_t = gated * g
            else:
                x_t = x_steps[t][:, di]
                h_t = x_t + gated * (g - x_t)
            if keep is not None:
                h_t = h_t * keep[t]
            h[di][t] = h_t
            c_prev = c
        c_last.append(c_prev)
    h = torch.stack([torch.stack(h[di], dim=0) for di in range(dirs)], dim=2)
    return h.reshape(length, batch, dirs * d), torch.stack(c_last, dim=1).reshape(batch, dirs * d)


def elementwise_recurrence_packed_reference(
    U: Tensor,
    x: Optional[Tensor],
    weight_c: Tensor,
    bias: Tensor,
    c0: Optional[Tensor],
    hidden_size: int,
    batch_sizes: List[int],
    bidirectional: bool = False,
    has_skip_term: bool = True,
    scale_x: float = 1.0,
    activation: str = "none",
    mask_c: Optional[Tensor] = None,
) -> Tuple[Tensor, Tensor]:
    """The recurrence over a packed batch (a PackedSequence's time-major layout): step t's rows
    are the next ``batch_sizes[t]`` rows of U (N, dirs*d*k) and x (N, dirs*d), sequences sorted
    by decreasing length, so step t updates the state of the first ``batch_sizes[t]``
    sequences only. The backward direction of a sequence therefore starts at its own last
    token (from c0), as the padded path does with ``mask_pad``. c0 and mask_c are (B, dirs*d)
    with B = batch_sizes[0], in that sorted order. Returns h (N, dirs*d), c_last (B, dirs*d).
    """
    dirs = num_directions(bidirectional)
    d = hidden_size
    batch = batch_sizes[0]
    k = U.size(-1) // (dirs * d)
    U_steps = U.reshape(-1, dirs, d, k).split(batch_sizes)
    v_f, v_r = weight_c.reshape(2, dirs, d)
    b_f, b_r = bias.reshape(2, dirs, d)
    x_steps = None
    if has_skip_term and k == 3:
        x_steps = (x.reshape(-1, dirs, d) * scale_x).split(batch_sizes)
    if c0 is None:
        c0 = U.new_zeros(batch, dirs * d)
    c0 = c0.reshape(batch, dirs, d)
    drop = None if mask_c is None else mask_c.reshape(batch, dirs, d)

    length = len(batch_sizes)
    h = [[None] * length for _ in range(dirs)]
    c_last = []
    for di in range(dirs):
        state = c0[:, di]  # (B, d): rows past a sequence's end (or before its start) stay put
        for t in (range(length) if di == 0 else range(length - 1, -1, -1)):
            n = batch_sizes[t]
            c_prev, u = state[:n], U_steps[t][:, di]
            f = torch.sigmoid(u[..., 1] + v_f[di] * c_prev + b_f[di])
            r = torch.sigmoid(u[..., 2] + v_r[di] * c_prev + b_r[di])
            c = f * c_prev + (1 - f) * u[..., 0]
            g = torch.tanh(c) if activation == "tanh" else c
            gated = r if drop is None else r * drop[:n, di]
            if not has_skip_term:
                h[di][t] = gated * g
            else:
                x_t = x_steps[t][:, di] if x_steps is not None else u[..., 3]
                h[di][t] = x_t + gated * (g - x_t)
            state = c if n == batch else torch.cat([c, state[n:]])
        c_last.append(state)
    h = torch.cat([torch.stack([h[di][t] for di in range(dirs)], dim=1) for t in range(length)])
    return h.reshape(-1, dirs * d), torch.stack(c_last, dim=1).reshape(batch, dirs * d)
