"""The Triton kernels of the SRU recurrence: forward and backward, as plain functions jitted on first use.

``sru/ops/triton/padded.py`` (the custom ops, argument checks and launch configuration) is the module to read
first; this one holds only the kernel bodies, which follow docs/spec.md#forward-recurrence,
docs/spec.md#backward and docs/spec.md#memory-layout.
"""
from typing import Dict, Optional, Tuple

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
SKIP_NONE, SKIP_X, SKIP_U3 = 0, 1, 2


if triton is not None:
    # Plain functions, turned into kernels by ``triton.jit`` on first use (see compiled_kernels), so that
    # whether they are compiled or interpreted follows TRITON_INTERPRET at call time. They call
    # no other @jit function (sigmoid and tanh are written out with tl.exp, no tl.sigmoid or
    # libdevice): the interpreter cannot run a helper jitted before TRITON_INTERPRET was set.

    def sru_forward_kernel(
        U, X, WC, BIAS, C0, MASK_C, MASK_PAD, SCALE,          # inputs
        H, C_ALL, C_LAST,                                    # outputs
        L, B, D, DD, scale_x,                                # sizes; DD = dirs * d
        K: tl.constexpr, SKIP: tl.constexpr, TANH: tl.constexpr, HAS_MASK_C: tl.constexpr,
        HAS_MASK_PAD: tl.constexpr, PER_STEP_W: tl.constexpr, SCALE_FROM_PTR: tl.constexpr,
        STORE_C: tl.constexpr, FP64: tl.constexpr, BLOCK: tl.constexpr,
        BATCH_SIZES=None, STEP_OFFSETS=None, PACKED: tl.constexpr = False,
    ):
        # PACKED: U, X, H, C_ALL are packed rows (N, .) (sru/ops/packing.py): step t holds the
        # first BATCH_SIZES[t] sequences, from row STEP_OFFSETS[t]; absent rows are skipped.
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
            if PACKED:
                here = live & (b < tl.load(BATCH_SIZES + t, mask=live, other=0))
                row = tl.load(STEP_OFFSETS + t, mask=live, other=0) * DD + j64
            else:
                here = live
                row = t * n + j64
            u0 = tl.load(U + row * K, mask=here, other=0.0).to(acc_t)
            u1 = tl.load(U + row * K + 1, mask=here, other=0.0).to(acc_t)
            u2 = tl.load(U + row * K + 2, mask=here, other=0.0).to(acc_t)
            if PER_STEP_W:
                v_f = tl.load(WC + row * 2, mask=here, other=0.0).to(acc_t)
                v_r = tl.load(WC + row * 2 + 1, mask=here, other=0.0).to(acc_t)
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
                    xp = tl.load(X + row, mask=here, other=0.0).to(acc_t) * sx
                else:
                    xp = tl.load(U + row * K + 3, mask=here, other=0.0).to(acc_t)
                h = xp + r * m * (g - xp)
            if HAS_MASK_PAD:  # a padded step keeps c and outputs 0
                pad = tl.load(MASK_PAD + t * B + b, mask=live, other=0) != 0
                c_new = tl.where(pad, c, c_new)
                h = tl.where(pad, 0.0, h)
            if PACKED:  # no step t for this sequence: its state stays
                c_new = tl.where(here, c_new, c)
            tl.store(H + row, h.to(H.dtype.element_ty), mask=here)
            if STORE_C:  # the history the backward needs; skipped for inference
                tl.store(C_ALL + row, c_new.to(C_ALL.dtype.element_ty), mask=here)
            c = c_new

        tl.store(C_LAST + j, c.to(C_LAST.dtype.element_ty), mask=live)

    def sru_backward_kernel(
        GRAD_H, GRAD_C_LAST, U, X, WC, BIAS, C0, MASK_C, MASK_PAD, SCALE, C_ALL,   # inputs
        GRAD_U, GRAD_X, GRAD_WC, GRAD_C0, GRAD_MASK_C,                            # outputs
        PART_W, PART_B,                                                           # (B, 2*DD)
        L, B, D, DD, scale_x,
        K: tl.constexpr, SKIP: tl.constexpr, TANH: tl.constexpr, HAS_MASK_C: tl.constexpr,
        HAS_MASK_PAD: tl.constexpr, PER_STEP_W: tl.constexpr, SCALE_FROM_PTR: tl.constexpr,
        NEED_GRAD_MASK_C: tl.constexpr, FP64: tl.constexpr, BLOCK: tl.constexpr,
        BATCH_SIZES=None, STEP_OFFSETS=None, PACKED: tl.constexpr = False,
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
        # (Packed: loaded at each step instead, a sequence's last step is not L - 1.)
        if PACKED:
            c_t = zero
        else:
            t_last = tl.where(backward, 0, L - 1).to(tl.int64)
            c_t = tl.load(C_ALL + t_last * n + j64, mask=live, other=0.0).to(acc_t)

        for i in range(0, L):
            s = L - 1 - i  # position in this column's processing order, walked in reverse
            t = tl.where(backward, L - 1 - s, s).to(tl.int64)
            t_prev = tl.where(backward, t + 1, t - 1)
            has_prev = (t_prev >= 0) & (t_prev < L)  # false on a column's first step: use c0
            if PACKED:  # rows from the offsets; a sequence's first step may come before L - 1
                here = live & (b < tl.load(BATCH_SIZES + t, mask=live, other=0))
                row = tl.load(STEP_OFFSETS + t, mask=live, other=0) * DD + j64
                has_prev = has_prev & (b < tl.load(BATCH_SIZES + t_prev, mask=live & has_prev, other=0))
                prev_row = tl.load(STEP_OFFSETS + t_prev, mask=live & has_prev, other=0) * DD + j64
                c_t = tl.load(C_ALL + row, mask=here, other=0.0).to(acc_t)
            else:
                here = live
                row = t * n + j64
                prev_row = t_prev * n + j64
            c_prev = tl.load(C_ALL + prev_row, mask=here & has_prev, other=0.0).to(acc_t)
            c_prev = tl.where(has_prev, c_prev, c0)

            u0 = tl.load(U + row * K, mask=here, other=0.0).to(acc_t)
            u1 = tl.load(U + row * K + 1, mask=here, other=0.0).to(acc_t)
            u2 = tl.load(U + row * K + 2, mask=here, other=0.0).to(acc_t)
            if PER_STEP_W:
                v_f = tl.load(WC + row * 2, mask=here, other=0.0).to(acc_t)
                v_r = tl.load(WC + row * 2 + 1, mask=here, other=0.0).to(acc_t)
            gh = tl.load(GRAD_H + row, mask=here, other=0.0).to(acc_t)
            if HAS_MASK_PAD:
                pad = tl.load(MASK_PAD + t * B + b, mask=live, other=0) != 0
            if PACKED:
                pad = here == 0  # an absent step acts like a padded one (and stores nothing)
            if HAS_MASK_PAD or PACKED:
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
                xp = tl.load(X + row, mask=here, other=0.0).to(acc_t) * sx
            else:
                xp = tl.load(U + row * K + 3, mask=here, other=0.0).to(acc_t)

            gc = gc + gh * m * r * dg
            g_u2 = gh * m * (g - xp) * r * (1.0 - r)
            g_u0 = gc * (1.0 - f)
            g_u1 = gc * (c_prev - u0) * f * (1.0 - f)
            if HAS_MASK_PAD or PACKED:  # c_t = c_{t-1} on padding: U gets nothing, gc passes
                g_u0 = g_u0 * keep
                g_u1 = g_u1 * keep
                gc = tl.where(pad, gc, gc * f + g_u1 * v_f + g_u2 * v_r)
            else:
                gc = gc * f + g_u1 * v_f + g_u2 * v_r

            ty = GRAD_U.dtype.element_ty
            tl.store(GRAD_U + row * K, g_u0.to(ty), mask=here)
            tl.store(GRAD_U + row * K + 1, g_u1.to(ty), mask=here)
            tl.store(GRAD_U + row * K + 2, g_u2.to(ty), mask=here)
            if SKIP == 1:
                g_xp = gh * (1.0 - m * r)
                tl.store(GRAD_X + row, (g_xp * sx).to(GRAD_X.dtype.element_ty), mask=here)
            if K == 4:
                if SKIP == 2:
                    g_u3 = gh * (1.0 - m * r)
                else:
                    g_u3 = zero  # u3 unused without the skip term
                tl.store(GRAD_U + row * K + 3, g_u3.to(ty), mask=here)
            if PER_STEP_W:
                tw = GRAD_WC.dtype.element_ty
                tl.store(GRAD_WC + row * 2, (g_u1 * c_prev).to(tw), mask=here)
                tl.store(GRAD_WC + row * 2 + 1, (g_u2 * c_prev).to(tw), mask=here)
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


def compiled_kernels():
    """Return (forward, backward) kernels, jitted for the current TRITON_INTERPRET mode."""
    if triton is None:
        raise RuntimeError(
            "The 'triton' SRU backend needs the triton package (pip install triton); "
            f"importing it failed: {_TRITON_IMPORT_ERROR}. Use backend='reference' or 'cpu'."
        )
    interpret = bool(triton.knobs.runtime.interpret)
    if interpret not in _JITTED:
        _JITTED[interpret] = (triton.jit(sru_forward_kernel), triton.jit(sru_backward_kernel))
    return _JITTED[interpret]
