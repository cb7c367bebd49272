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
``elementwise_recurrence_reference`` (sru/ops/reference.py), whose ``gate_setup`` and
``cell_step`` this module scans: the ONNX path computes the very same maths.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

from .cpu.custom_op import fused_export_wanted, padded as fused_padded
from .reference import cell_step, gate_setup
from .tracing import exporting
from .spec import Masks, RecurrenceSpec, flat_entry


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


def padded(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor,
           c0: Optional[Tensor], masks: Masks, spec: RecurrenceSpec) -> Tuple[Tensor, Tensor]:
    """Return ``(h, c_last)`` as the reference does: h (L, B, dirs*d), c_last (B, dirs*d).
    Under ``torch.export`` on CPU: one call of the fused kernel's dispatcher op instead
    (sru/ops/cpu/custom_op.py), which AOTInductor compiles to a direct call."""
    if fused_export_wanted(U):
        return fused_padded(U, x, weight_c, bias, c0, masks, spec)
    length, batch = U.shape[0], U.shape[1]
    g = gate_setup(U, x, weight_c, bias, c0, masks.mask_c, spec, batch)
    per_step = g.v_f.dim() > 2  # (L, B, dirs, d): one more scanned input
    # (L, B, 1): 1 on real tokens, 0 on padding; ones when there is no padding.
    keep = (U.new_ones(length, batch, 1) if masks.mask_pad is None
            else (masks.mask_pad.reshape(length, batch, 1) == 0).to(U.dtype))
    # As wide as the state: the scan traces its body with a fresh size for each dimension of
    # each input, and one that is 1 is not specialised there, so (B, 1) * (B, d) fails to
    # broadcast when the program's shapes are static (torch.onnx.export without dynamic_shapes).
    keep = keep.expand(length, batch, spec.hidden_size).contiguous()

    h_dirs, c_dirs = [], []
    for di in range(spec.dirs):
        # .clone() each: scan rejects closure tensors that alias each other (views of one tensor).
        v_f = v_r = None
        if not per_step:
            v_f, v_r = g.v_f[di].clone(), g.v_r[di].clone()
        b_f, b_r = g.b_f[di].clone(), g.b_r[di].clone()
        drop = None if g.drop is None else g.drop[:, di].clone()
        step_inputs = [g.U[:, :, di].contiguous(), keep]
        # Placeholders (keep) where an input is absent: scan takes a fixed list of tensors.
        step_inputs.append(keep if g.x_skip is None else g.x_skip[:, :, di].contiguous())
        if per_step:
            step_inputs.append(torch.stack([g.v_f[:, :, di], g.v_r[:, :, di]], dim=-1))

        def step(c_prev: Tensor, inputs):
            u, keep_t = inputs[0], inputs[1]
            w_f, w_r = (inputs[3][..., 0], inputs[3][..., 1]) if per_step else (v_f, v_r)
            x_t = None if g.x_skip is None else inputs[2]
            return cell_step(u, c_prev, (w_f, w_r, b_f, b_r), x_t, drop, keep_t, spec.use_tanh)

        # Row-major strides even for size-1 dims: scan requires init and carry to match.
        c_init = g.c0[:, di].clone(memory_format=torch.contiguous_format)
        if exporting():  # see _inference_only
            c_init, step_inputs, closure = _inference_only(c_init, step_inputs,
                                                           (v_f, v_r, b_f, b_r, drop))
            v_f, v_r, b_f, b_r, drop = closure
        c_last, h = _scan()(step, c_init, step_inputs, reverse=di == 1)
        h_dirs.append(h)
        c_dirs.append(c_last)
    h = torch.stack(h_dirs, dim=2).reshape(length, batch, spec.width)
    return h, torch.stack(c_dirs, dim=1).reshape(batch, spec.width)


elementwise_recurrence_scan = flat_entry(padded, "elementwise_recurrence_scan")

# No packed scan: a packed batch exports through the reference loop, unrolled to its length.
from .reference import packed  # noqa: E402,F401
