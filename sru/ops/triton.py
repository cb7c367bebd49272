"""The SRU elementwise recurrence as fused Triton kernels (GPU; CPU under TRITON_INTERPRET=1).

Same arguments, layouts and semantics as ``elementwise_recurrence_reference`` in
``sru/ops/reference.py`` (read that first). One forward and one backward kernel:

* Work is split over columns ``j`` of the flattened (B, dirs*d) state: each program owns
  BLOCK columns, both directions in ONE launch. A column's direction (``j % (dirs*d) >= d``
  means backward) decides whether it walks time forwards or backwards; the loop over time is
  sequential and the state ``c`` stays in registers.
* Forward stores every ``c_t`` (L, B, dirs*d) in fp32 (fp64 for fp64 inputs) so the backward
  can recompute the gates in reverse time instead of storing them (docs/spec.md#backward).
* Gradients of the shared ``weight_c``/``bias`` are accumulated per column in registers over
  time and written as per-(batch, column) partial sums (B, 2*dirs*d), then reduced with
  ``torch.sum``: deterministic, no atomics. Per-step ``weight_c`` (L, B, dirs*d*2) gets its
  gradient per (t, b, column) directly.
* Precision: inputs may be fp32/fp16/bf16 (fp64 for gradcheck); every load is converted to the
  fp32 (fp64) compute type, outputs are stored in U's dtype, gradients in each input's dtype.

The kernels are jitted lazily on first use (not at import), so ``import sru.ops.triton`` works
without triton, and TRITON_INTERPRET=1 only has to be set before the first call.
"""
import contextlib
import os
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

try:  # triton is optional: the module must import without it (CPU-only installs)
    import triton
    import triton.language as tl
except ImportError as _err:  # pragma: no cover - exercised only where triton is absent
    triton = None
    tl = None
    _TRITON_IMPORT_ERROR: Optional[ImportError] = _err
else:
    _TRITON_IMPORT_ERROR = None

# Skip-term modes (a compile-time constant of the kernels).
_SKIP_NONE, _SKIP_X, _SKIP_U3 = 0, 1, 2


if triton is not None:
    # Plain functions, turned into kernels by ``triton.jit`` on first use (see _kernels), so that
    # whether they are compiled or interpreted follows TRITON_INTERPRET at call time. They call
    # no other @jit function (sigmoid and tanh are written out with tl.exp, no tl.sigmoid or
    # libdevice): the interpreter cannot run a helper jitted before TRITON_INTERPRET was set.

    def _sru_forward_kernel(
        U, X, WC, BIAS, C0, MASK_C, MASK_PAD, SCALE,          # inputs
        H, C_ALL, C_LAST,                                    # outputs
        L, B, D, DD, scale_x,                                # sizes; DD = dirs * d
        K: tl.constexpr, SKIP: tl.constexpr, TANH: tl.constexpr, HAS_MASK_C: tl.constexpr,
        HAS_MASK_PAD: tl.constexpr, PER_STEP_W: tl.constexpr, SCALE_FROM_PTR: tl.constexpr,
        STORE_C: tl.constexpr, FP64: tl.constexpr, BLOCK: tl.constexpr,
    ):
        acc_t = tl.float64 if FP64 else tl.float32
        n = B * DD
        j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = j < n
        j64 = j.to(tl.int64)
        col = j % DD
        b = j // DD
        backward = col >= D  # only possible when bidirectional (DD == 2 * D)

        b_f = tl.load(BIAS + col, mask=live, other=0.0).to(acc_t)
        b_r = tl.load(BIAS + DD + col, mask=live, other=0.0).to(acc_t)
        if not PER_STEP_W:
            v_f = tl.load(WC + col, mask=live, other=0.0).to(acc_t)
            v_r = tl.load(WC + DD + col, mask=live, other=0.0).to(acc_t)
        if HAS_MASK_C:
            m = tl.load(MASK_C + j, mask=live, other=0.0).to(acc_t)
        else:
            m = 1.0
        if SKIP == 1:
            if SCALE_FROM_PTR:
                sx = tl.load(SCALE).to(acc_t)
            else:
                sx = scale_x
        c = tl.load(C0 + j, mask=live, other=0.0).to(acc_t)

        for s in range(0, L):
            t = tl.where(backward, L - 1 - s, s).to(tl.int64)
            row = t * n + j64
            u0 = tl.load(U + row * K, mask=live, other=0.0).to(acc_t)
            u1 = tl.load(U + row * K + 1, mask=live, other=0.0).to(acc_t)
            u2 = tl.load(U + row * K + 2, mask=live, other=0.0).to(acc_t)
            if PER_STEP_W:
                v_f = tl.load(WC + row * 2, mask=live, other=0.0).to(acc_t)
                v_r = tl.load(WC + row * 2 + 1, mask=live, other=0.0).to(acc_t)
            f = 1.0 / (1.0 + tl.exp(-(u1 + v_f * c + b_f)))
            r = 1.0 / (1.0 + tl.exp(-(u2 + v_r * c + b_r)))
            c_new = u0 + f * (c - u0)
            if TANH:
                g = 2.0 / (1.0 + tl.exp(-2.0 * c_new)) - 1.0  # tanh(c) = 2 sigmoid(2c) - 1
            else:
                g = c_new
            if SKIP == 0:
                h = r * m * g
            else:
                if SKIP == 1:
                    xp = tl.load(X + row, mask=live, other=0.0).to(acc_t) * sx
                else:
                    xp = tl.load(U + row * K + 3, mask=live, other=0.0).to(acc_t)
                h = xp + r * m * (g - xp)
            if HAS_MASK_PAD:  # a padded step keeps c and outputs 0
                pad = tl.load(MASK_PAD + t * B + b, mask=live, other=0) != 0
                c_new = tl.where(pad, c, c_new)
                h = tl.where(pad, 0.0, h)
            tl.store(H + row, h.to(H.dtype.element_ty), mask=live)
            if STORE_C:  # the history the backward needs; skipped for inference
                tl.store(C_ALL + row, c_new.to(C_ALL.dtype.element_ty), mask=live)
            c = c_new

        tl.store(C_LAST + j, c.to(C_LAST.dtype.element_ty), mask=live)

    def _sru_backward_kernel(
        GRAD_H, GRAD_C_LAST, U, X, WC, BIAS, C0, MASK_C, MASK_PAD, SCALE, C_ALL,   # inputs
        GRAD_U, GRAD_X, GRAD_WC, GRAD_C0, GRAD_MASK_C,                            # outputs
        PART_W, PART_B,                                                           # (B, 2*DD)
        L, B, D, DD, scale_x,
        K: tl.constexpr, SKIP: tl.constexpr, TANH: tl.constexpr, HAS_MASK_C: tl.constexpr,
        HAS_MASK_PAD: tl.constexpr, PER_STEP_W: tl.constexpr, SCALE_FROM_PTR: tl.constexpr,
        NEED_GRAD_MASK_C: tl.constexpr, FP64: tl.constexpr, BLOCK: tl.constexpr,
    ):
        acc_t = tl.float64 if FP64 else tl.float32
        n = B * DD
        j = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        live = j < n
        j64 = j.to(tl.int64)
        col = j % DD
        b = j // DD
        backward = col >= D

        b_f = tl.load(BIAS + col, mask=live, other=0.0).to(acc_t)
        b_r = tl.load(BIAS + DD + col, mask=live, other=0.0).to(acc_t)
        if not PER_STEP_W:
            v_f = tl.load(WC + col, mask=live, other=0.0).to(acc_t)
            v_r = tl.load(WC + DD + col, mask=live, other=0.0).to(acc_t)
        if HAS_MASK_C:
            m = tl.load(MASK_C + j, mask=live, other=0.0).to(acc_t)
        else:
            m = 1.0
        if SKIP == 1:
            if SCALE_FROM_PTR:
                sx = tl.load(SCALE).to(acc_t)
            else:
                sx = scale_x
        c0 = tl.load(C0 + j, mask=live, other=0.0).to(acc_t)

        gc = tl.load(GRAD_C_LAST + j, mask=live, other=0.0).to(acc_t)  # dLoss/dc, carried back
        zero = tl.full([BLOCK], 0.0, acc_t)
        acc_vf = zero
        acc_vr = zero
        acc_bf = zero
        acc_br = zero
        acc_m = zero
        # c of the last processed step; each iteration loads its c_{t-1}, which is the next c_t.
        t_last = tl.where(backward, 0, L - 1).to(tl.int64)
        c_t = tl.load(C_ALL + t_last * n + j64, mask=live, other=0.0).to(acc_t)

        for i in range(0, L):
            s = L - 1 - i  # position in this column's processing order, walked in reverse
            t = tl.where(backward, L - 1 - s, s).to(tl.int64)
            t_prev = tl.where(backward, t + 1, t - 1)
            row = t * n + j64
            has_prev = (t_prev >= 0) & (t_prev < L)  # false on a column's first step: use c0
            c_prev = tl.load(C_ALL + t_prev * n + j64, mask=live & has_prev, other=0.0).to(acc_t)
            c_prev = tl.where(has_prev, c_prev, c0)

            u0 = tl.load(U + row * K, mask=live, other=0.0).to(acc_t)
            u1 = tl.load(U + row * K + 1, mask=live, other=0.0).to(acc_t)
            u2 = tl.load(U + row * K + 2, mask=live, other=0.0).to(acc_t)
            if PER_STEP_W:
                v_f = tl.load(WC + row * 2, mask=live, other=0.0).to(acc_t)
                v_r = tl.load(WC + row * 2 + 1, mask=live, other=0.0).to(acc_t)
            gh = tl.load(GRAD_H + row, mask=live, other=0.0).to(acc_t)
            if HAS_MASK_PAD:
                pad = tl.load(MASK_PAD + t * B + b, mask=live, other=0) != 0
                keep = tl.where(pad, 0.0, 1.0).to(acc_t)
                gh = gh * keep  # h = 0 on padding: no gradient enters there

            f = 1.0 / (1.0 + tl.exp(-(u1 + v_f * c_prev + b_f)))
            r = 1.0 / (1.0 + tl.exp(-(u2 + v_r * c_prev + b_r)))
            if TANH:
                g = 2.0 / (1.0 + tl.exp(-2.0 * c_t)) - 1.0
                dg = 1.0 - g * g
            else:
                g = c_t
                dg = 1.0
            if SKIP == 0:
                xp = 0.0
            elif SKIP == 1:
                xp = tl.load(X + row, mask=live, other=0.0).to(acc_t) * sx
            else:
                xp = tl.load(U + row * K + 3, mask=live, other=0.0).to(acc_t)

            gc = gc + gh * m * r * dg
            g_u2 = gh * m * (g - xp) * r * (1.0 - r)
            g_u0 = gc * (1.0 - f)
            g_u1 = gc * (c_prev - u0) * f * (1.0 - f)
            if HAS_MASK_PAD:  # c_t = c_{t-1} on padding: U gets nothing, gc passes through
                g_u0 = g_u0 * keep
                g_u1 = g_u1 * keep
                gc = tl.where(pad, gc, gc * f + g_u1 * v_f + g_u2 * v_r)
            else:
                gc = gc * f + g_u1 * v_f + g_u2 * v_r

            ty = GRAD_U.dtype.element_ty
            tl.store(GRAD_U + row * K, g_u0.to(ty), mask=live)
            tl.store(GRAD_U + row * K + 1, g_u1.to(ty), mask=live)
            tl.store(GRAD_U + row * K + 2, g_u2.to(ty), mask=live)
            if SKIP == 1:
                g_xp = gh * (1.0 - m * r)
                tl.store(GRAD_X + row, (g_xp * sx).to(GRAD_X.dtype.element_ty), mask=live)
            if K == 4:
                if SKIP == 2:
                    g_u3 = gh * (1.0 - m * r)
                else:
                    g_u3 = zero  # u3 unused without the skip term
                tl.store(GRAD_U + row * K + 3, g_u3.to(ty), mask=live)
            if PER_STEP_W:
                tw = GRAD_WC.dtype.element_ty
                tl.store(GRAD_WC + row * 2, (g_u1 * c_prev).to(tw), mask=live)
                tl.store(GRAD_WC + row * 2 + 1, (g_u2 * c_prev).to(tw), mask=live)
            else:
                acc_vf += g_u1 * c_prev
                acc_vr += g_u2 * c_prev
            acc_bf += g_u1
            acc_br += g_u2
            if NEED_GRAD_MASK_C:
                acc_m += gh * r * (g - xp)
            c_t = c_prev

        tl.store(GRAD_C0 + j, gc.to(GRAD_C0.dtype.element_ty), mask=live)
        part = b.to(tl.int64) * (2 * DD) + col
        tl.store(PART_B + part, acc_bf, mask=live)
        tl.store(PART_B + part + DD, acc_br, mask=live)
        if not PER_STEP_W:
            tl.store(PART_W + part, acc_vf, mask=live)
            tl.store(PART_W + part + DD, acc_vr, mask=live)
        if NEED_GRAD_MASK_C:
            tl.store(GRAD_MASK_C + j, acc_m.to(GRAD_MASK_C.dtype.element_ty), mask=live)


_JITTED: Dict[bool, Tuple[object, object]] = {}


def _kernels():
    """Return (forward, backward) kernels, jitted for the current TRITON_INTERPRET mode."""
    if triton is None:
        raise RuntimeError(
            "The 'triton' SRU backend needs the triton package (pip install triton); "
            f"importing it failed: {_TRITON_IMPORT_ERROR}. Use backend='reference' or 'cpu'."
        )
    interpret = bool(triton.knobs.runtime.interpret)
    if interpret not in _JITTED:
        _JITTED[interpret] = (triton.jit(_sru_forward_kernel), triton.jit(_sru_backward_kernel))
    return _JITTED[interpret]


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _launch_config(n_columns: int) -> Tuple[int, int, int]:
    """(BLOCK, num_warps, grid): one column per thread, 32..128 columns (1..4 warps) a program.

    Each step's loads wait a full memory latency (the loop is sequential), so the latency is
    hidden by many resident warps, not by work per thread: small problems get 1-warp programs
    spread over all SMs, large ones ~1024+ programs of 4 warps. Untuned: see docs/gpu.md."""
    block = triton.next_power_of_2(max(1, triton.cdiv(n_columns, 1024)))
    block = max(32, min(128, block))
    return block, block // 32, triton.cdiv(n_columns, block)


def _on_device(t: Tensor):
    """Launch on the tensors' own GPU (Triton uses that device's current stream)."""
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


def _compute_dtype(U: Tensor) -> torch.dtype:
    return torch.float64 if U.dtype == torch.float64 else torch.float32


def _scale_args(scale_x: Optional[Tensor], like: Tensor):
    # A tensor scale_x (the module's buffer) is read inside the kernel: no .item() sync per call.
    return (scale_x, True) if scale_x is not None else (like, False)


# ---------------------------------------------------------------------------------------------
# Custom ops: the kernels wrapped for autograd, torch.compile (fake impls) and the dispatcher.

@torch.library.custom_op("sru_triton::recurrence_forward", mutates_args=())
def _recurrence_forward(
    U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor, c0: Tensor,
    mask_c: Optional[Tensor], mask_pad: Optional[Tensor], scale_x: Optional[Tensor],
    scale_value: float, hidden_size: int, skip: int, tanh: bool, store_history: bool,
) -> Tuple[Tensor, Tensor, Tensor]:
    """Returns (h, c_last, c history); the history is empty unless store_history."""
    forward_kernel, _ = _kernels()
    length, batch = U.shape[0], U.shape[1]
    dd = c0.shape[1]
    k = U.shape[2] // dd
    h = torch.empty(length, batch, dd, dtype=U.dtype, device=U.device)
    c_all = torch.empty(length if store_history else 0, batch, dd, dtype=_compute_dtype(U),
                        device=U.device)
    c_last = torch.empty(batch, dd, dtype=U.dtype, device=U.device)
    if length == 0 or batch * dd == 0:
        c_last.copy_(c0)
        return h, c_last, c_all
    block, num_warps, grid = _launch_config(batch * dd)
    scale_ptr, scale_from_ptr = _scale_args(scale_x, U)
    with _on_device(U):
        forward_kernel[(grid,)](
            U, U if x is None else x, weight_c, bias, c0, U if mask_c is None else mask_c,
            U if mask_pad is None else mask_pad, scale_ptr, h, c_all, c_last,
            length, batch, hidden_size, dd, scale_value,
            K=k, SKIP=skip, TANH=tanh, HAS_MASK_C=mask_c is not None,
            HAS_MASK_PAD=mask_pad is not None, PER_STEP_W=weight_c.dim() > 1,
            SCALE_FROM_PTR=scale_from_ptr, STORE_C=store_history, FP64=U.dtype == torch.float64,
            BLOCK=block, num_warps=num_warps,
        )
    return h, c_last, c_all


@_recurrence_forward.register_fake
def _(U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, scale_value, hidden_size, skip, tanh,
      store_history):
    length, batch, dd = U.shape[0], U.shape[1], c0.shape[1]
    return (U.new_empty(length, batch, dd), U.new_empty(batch, dd),
            U.new_empty(length if store_history else 0, batch, dd, dtype=_compute_dtype(U)))


@torch.library.custom_op("sru_triton::recurrence_backward", mutates_args=())
def _recurrence_backward(
    grad_h: Tensor, grad_c_last: Tensor, U: Tensor, x: Optional[Tensor], weight_c: Tensor,
    bias: Tensor, c0: Tensor, mask_c: Optional[Tensor], mask_pad: Optional[Tensor],
    scale_x: Optional[Tensor], c_all: Tensor, scale_value: float, hidden_size: int, skip: int,
    tanh: bool, need_grad_mask_c: bool,
) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Returns grads of (U, x, weight_c, bias, c0, mask_c); x/mask_c grads are empty if unused."""
    _, backward_kernel = _kernels()
    length, batch = U.shape[0], U.shape[1]
    dd = c0.shape[1]
    k = U.shape[2] // dd
    acc = _compute_dtype(U)
    per_step = weight_c.dim() > 1
    grad_U = torch.empty_like(U)
    grad_x = torch.empty_like(x) if skip == _SKIP_X else U.new_empty(0)
    grad_wc = torch.empty_like(weight_c) if per_step else U.new_empty(0)
    grad_c0 = torch.empty_like(c0)
    grad_mask_c = torch.empty_like(mask_c) if need_grad_mask_c else U.new_empty(0)
    part_w = torch.empty(batch, 2 * dd, dtype=acc, device=U.device)
    part_b = torch.empty(batch, 2 * dd, dtype=acc, device=U.device)
    if length == 0 or batch * dd == 0:
        for t in (grad_U, grad_x, grad_wc, grad_mask_c, part_w, part_b):
            t.zero_()
        grad_c0.copy_(grad_c_last)
    else:
        block, num_warps, grid = _launch_config(batch * dd)
        scale_ptr, scale_from_ptr = _scale_args(scale_x, U)
        with _on_device(U):
            backward_kernel[(grid,)](
                grad_h, grad_c_last, U, U if x is None else x, weight_c, bias, c0,
                U if mask_c is None else mask_c, U if mask_pad is None else mask_pad, scale_ptr,
                c_all, grad_U, grad_x if grad_x.numel() else U, grad_wc if per_step else U,
                grad_c0, grad_mask_c if need_grad_mask_c else U, part_w, part_b,
                length, batch, hidden_size, dd, scale_value,
                K=k, SKIP=skip, TANH=tanh, HAS_MASK_C=mask_c is not None,
                HAS_MASK_PAD=mask_pad is not None, PER_STEP_W=per_step,
                SCALE_FROM_PTR=scale_from_ptr, NEED_GRAD_MASK_C=need_grad_mask_c,
                FP64=U.dtype == torch.float64, BLOCK=block, num_warps=num_warps,
            )
    # Deterministic reduction of the per-(batch, column) partial sums.
    grad_bias = part_b.sum(0).to(bias.dtype)
    if not per_step:
        grad_wc = part_w.sum(0).to(weight_c.dtype)
    return grad_U, grad_x, grad_wc, grad_bias, grad_c0, grad_mask_c


@_recurrence_backward.register_fake
def _(grad_h, grad_c_last, U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, c_all,
      scale_value, hidden_size, skip, tanh, need_grad_mask_c):
    return (torch.empty_like(U), torch.empty_like(x) if skip == _SKIP_X else U.new_empty(0),
            torch.empty_like(weight_c), torch.empty_like(bias), torch.empty_like(c0),
            torch.empty_like(mask_c) if need_grad_mask_c else U.new_empty(0))


def _setup_context(ctx, inputs, output):
    (U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, scale_value, hidden_size, skip, tanh,
     store_history) = inputs
    if not store_history:
        raise RuntimeError("sru_triton::recurrence_forward was called with store_history=False "
                           "while gradients are required; call elementwise_recurrence_triton")
    ctx.save_for_backward(U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, output[2])
    ctx.args = (scale_value, hidden_size, skip, tanh)


def _backward(ctx, grad_h, grad_c_last, _grad_c_all):
    U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, c_all = ctx.saved_tensors
    scale_value, hidden_size, skip, tanh = ctx.args
    grad_h = torch.zeros_like(c_all, dtype=U.dtype) if grad_h is None else grad_h.contiguous()
    grad_c_last = torch.zeros_like(c0) if grad_c_last is None else grad_c_last.contiguous()
    need_grad_mask_c = mask_c is not None and ctx.needs_input_grad[5]
    g_U, g_x, g_wc, g_bias, g_c0, g_mask_c = _recurrence_backward(
        grad_h, grad_c_last, U, x, weight_c, bias, c0, mask_c, mask_pad, scale_x, c_all,
        scale_value, hidden_size, skip, tanh, need_grad_mask_c)
    return (g_U, g_x if skip == _SKIP_X else None, g_wc, g_bias, g_c0,
            g_mask_c if need_grad_mask_c else None, None, None, None, None, None, None, None)


_recurrence_forward.register_autograd(_backward, setup_context=_setup_context)


# ---------------------------------------------------------------------------------------------
# Public entry point.

def _check(name: str, t: Optional[Tensor], shapes, device) -> None:
    if t is None:
        return
    if tuple(t.shape) not in [tuple(s) for s in shapes]:
        want = " or ".join(str(tuple(s)) for s in shapes)
        raise ValueError(f"elementwise_recurrence_triton: {name} must have shape {want}, "
                         f"got {tuple(t.shape)}")
    if t.device != device:
        raise ValueError(f"elementwise_recurrence_triton: {name} must be on {device} like U, "
                         f"got {t.device}")


def elementwise_recurrence_triton(
    U: Tensor,
    x: Optional[Tensor],
    weight_c: Tensor,
    bias: Tensor,
    c0: Optional[Tensor],
    hidden_size: int,
    bidirectional: bool = False,
    has_skip_term: bool = True,
    scale_x=1.0,
    activation="none",
    mask_c: Optional[Tensor] = None,
    mask_pad: Optional[Tensor] = None,
    amp_recurrence_fp16: bool = False,
) -> Tuple[Tensor, Tensor]:
    """Return ``(h, c_last)`` exactly as ``elementwise_recurrence_reference`` does.

    ``h`` and ``c_last`` come back in U's dtype; the state and all arithmetic are fp32 (fp64
    for fp64 U). ``scale_x`` may be a float or a 1-element tensor (the module's buffer, read on
    the device without a sync); it is a constant (no gradient), as in the official package.
    ``amp_recurrence_fp16`` (official meaning): when U is fp16 (e.g. from a matmul under
    autocast), the other recurrence inputs (x, weight_c, bias, c0, mask_c) are cast to fp16 too,
    so everything the kernel reads is half precision; arithmetic still runs in fp32.
    """
    if U.dim() != 3:
        raise ValueError(f"elementwise_recurrence_triton: U must be (L, B, dirs*d*k), got shape "
                         f"{tuple(U.shape)}")
    if not U.is_cuda and not _interpreting():
        raise RuntimeError("elementwise_recurrence_triton runs on CUDA tensors; for CPU tensors "
                           "set TRITON_INTERPRET=1 (slow, for tests) or use backend='cpu'.")
    if activation not in ("none", "tanh", 0, 1):
        raise ValueError(f"activation must be 'none' or 'tanh' (or 0/1), got {activation!r}")
    tanh = activation in ("tanh", 1)
    dirs = 2 if bidirectional else 1
    dd = dirs * hidden_size
    length, batch = U.shape[0], U.shape[1]
    if hidden_size <= 0 or U.shape[2] not in (3 * dd, 4 * dd):
        raise ValueError(f"elementwise_recurrence_triton: U's last dim must be dirs*d*k = "
                         f"{3 * dd} or {4 * dd} (k=3/4, d={hidden_size}, dirs={dirs}), "
                         f"got {U.shape[2]}")
    k = U.shape[2] // dd
    skip = _SKIP_NONE if not has_skip_term else (_SKIP_X if k == 3 else _SKIP_U3)
    if skip == _SKIP_X and x is None:
        raise ValueError("elementwise_recurrence_triton: x (L, B, dirs*d) is required when "
                         "has_skip_term=True and k == 3; pass x or set has_skip_term=False")
    if skip != _SKIP_X:
        x = None  # not read by the kernel
    dev = U.device
    _check("x", x, [(length, batch, dd)], dev)
    _check("weight_c", weight_c, [(2 * dd,), (length, batch, 2 * dd)], dev)
    _check("bias", bias, [(2 * dd,)], dev)
    _check("c0", c0, [(batch, dd)], dev)
    _check("mask_c", mask_c, [(batch, dd)], dev)
    _check("mask_pad", mask_pad, [(length, batch)], dev)

    if amp_recurrence_fp16 and U.dtype == torch.float16:
        half = lambda t: None if t is None else t.half()  # noqa: E731
        x, weight_c, bias, c0, mask_c = half(x), half(weight_c), half(bias), half(c0), half(mask_c)
    if c0 is None:
        c0 = U.new_zeros(batch, dd)
    if mask_pad is not None:  # any nonzero = padded; a byte per step is all the kernel reads
        mask_pad = mask_pad.ne(0).to(torch.uint8).contiguous()
    scale_t = None
    scale_value = 1.0
    if isinstance(scale_x, Tensor):
        if scale_x.numel() != 1:
            raise ValueError(f"scale_x must be a float or a 1-element tensor, got shape "
                             f"{tuple(scale_x.shape)}")
        scale_t = scale_x.detach().reshape(1).to(device=dev)
    else:
        scale_value = float(scale_x)
        if U.dtype == torch.float64:  # a float kernel argument is fp32; keep fp64 exact
            scale_t = torch.tensor([scale_value], dtype=torch.float64, device=dev)

    # Inference needs no c history: skip writing it (a quarter of the forward's traffic).
    store_history = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (U, x, weight_c, bias, c0, mask_c))
    contig = lambda t: None if t is None else t.contiguous()  # noqa: E731
    h, c_last, _ = _recurrence_forward(
        U.contiguous(), contig(x), weight_c.contiguous(), bias.contiguous(), c0.contiguous(),
        contig(mask_c), mask_pad, scale_t, scale_value, hidden_size, skip, tanh, store_history)
    return h, c_last
