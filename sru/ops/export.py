"""The SRU recurrence in an export-friendly form: ``torch.onnx.export`` and ``torch.export``.

The fused kernels are opaque custom ops (``sru::``, ``sru_triton::``) that ONNX has no
operator for, and the reference's Python loop over time unrolls to a fixed length. Here the
recurrence is written with ``torch._higher_order_ops.scan``, a loop over the leading (time)
dimension whose body is traced once: ``torch.export`` keeps it as one ``scan`` node with a
symbolic length, and the ONNX exporter translates that node to an ONNX ``Scan`` whose body is
one time step (torch/onnx/_internal/exporter/_torchlib/ops/hop.py). The exported model therefore
takes any (L, B) at run time (dynamic shapes), with ``mask_pad`` and a carried state c0.

``sru.ops.elementwise_recurrence`` uses this form whenever an export is tracing
(``exporting()``), whatever the backend; it is also callable eagerly (backend ``"export"`` in
the tests), and its numbers are the reference's. Same arguments and layouts as
``elementwise_recurrence_reference`` (sru/ops/reference.py).
"""
from typing import Optional, Tuple

import torch
from torch import Tensor
from .shapes import num_directions


def exporting() -> bool:
    """Whether ``torch.onnx.export`` or ``torch.export`` is tracing right now."""
    return torch.onnx.is_in_onnx_export() or torch.compiler.is_exporting()


def _inference_only(c_init: Tensor, step_inputs: list, closure: tuple):
    """Everything the scan reads, detached: an exported model is for inference, and with
    inputs that require grad the scan is traced with its backward, whose fake outputs the
    ONNX exporter's decomposition step fails on (torch 2.13: "'SymInt' object has no
    attribute 'unsqueeze'"). A detach exports as nothing (or an Identity)."""
    detach = (lambda t: None if t is None else t.detach())
    return detach(c_init), [detach(t) for t in step_inputs], tuple(detach(t) for t in closure)


def _scan():
    from torch._higher_order_ops.scan import scan  # imported late: it pulls in torch._dynamo

    return scan


def elementwise_recurrence_scan(
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
    """Return ``(h, c_last)`` as the reference does: h (L, B, dirs*d), c_last (B, dirs*d)."""
    dirs = num_directions(bidirectional)
    d = hidden_size
    length, batch = U.shape[0], U.shape[1]
    k = U.shape[-1] // (dirs * d)
    U = U.reshape(length, batch, dirs, d, k)
    per_step = weight_c.dim() > 1  # (L, B, dirs*d*2): one more scanned input
    if c0 is None:
        c0 = U.new_zeros(batch, dirs * d)
    c0 = c0.reshape(batch, dirs, d)
    # (L, B, 1): 1 on real tokens, 0 on padding; ones when there is no padding.
    keep = (U.new_ones(length, batch, 1) if mask_pad is None
            else (mask_pad.reshape(length, batch, 1) == 0).to(U.dtype))
    skip_from_x = has_skip_term and k == 3
    xs = x.reshape(length, batch, dirs, d) * scale_x if skip_from_x else None

    h_dirs, c_dirs = [], []
    for di in range(dirs):
        # .clone() each: scan rejects closure tensors that alias each other (views of one tensor).
        v_f = v_r = None
        if not per_step:
            v_f, v_r = (w.clone() for w in weight_c.reshape(2, dirs, d)[:, di])
        b_f, b_r = (b.clone() for b in bias.reshape(2, dirs, d)[:, di])
        drop = None if mask_c is None else mask_c.reshape(batch, dirs, d)[:, di].clone()
        step_inputs = [U[:, :, di].contiguous(), keep]
        step_inputs.append(xs[:, :, di].contiguous() if skip_from_x else keep)
        if per_step:
            step_inputs.append(weight_c.reshape(length, batch, dirs, d, 2)[:, :, di].contiguous())

        def step(c_prev: Tensor, inputs):
            u, keep_t = inputs[0], inputs[1]
            w_f, w_r = (inputs[3][..., 0], inputs[3][..., 1]) if per_step else (v_f, v_r)
            f = torch.sigmoid(u[..., 1] + w_f * c_prev + b_f)
            r = torch.sigmoid(u[..., 2] + w_r * c_prev + b_r)
            c = f * c_prev + (1 - f) * u[..., 0]
            c = keep_t * c + (1 - keep_t) * c_prev  # a padded step keeps the state
            g = torch.tanh(c) if activation == "tanh" else c
            gated = r if drop is None else r * drop
            if not has_skip_term:
                h = gated * g
            else:
                x_t = inputs[2] if skip_from_x else u[..., 3]
                h = x_t + gated * (g - x_t)
            return c, h * keep_t

        # Row-major strides even for size-1 dims: scan requires init and carry to match.
        c_init = c0[:, di].clone(memory_format=torch.contiguous_format)
        if exporting():  # see _inference_only
            c_init, step_inputs, closure = _inference_only(c_init, step_inputs,
                                                           (v_f, v_r, b_f, b_r, drop))
            v_f, v_r, b_f, b_r, drop = closure
        c_last, h = _scan()(step, c_init, step_inputs, reverse=di == 1)
        h_dirs.append(h)
        c_dirs.append(c_last)
    h = torch.stack(h_dirs, dim=2).reshape(length, batch, dirs * d)
    return h, torch.stack(c_dirs, dim=1).reshape(batch, dirs * d)
