"""SRU++ written out from the paper's equations (arXiv 2102.12459, section 2 / figure 2), for tests.

Plain PyTorch on the module's named parameters: explicit softmax attention (no
scaled_dot_product_attention), a Python loop over time for the recurrence (no sru.ops), so it
shares no code with ``sru.SRUpp`` beyond reading its parameters. Autograd differentiates it.
Eval-mode semantics (no dropout).
"""
import math

import torch
import torch.nn.functional as F


def _layer_norm(x, p, prefix):
    return F.layer_norm(x, x.shape[-1:], p[prefix + ".weight"], p[prefix + ".bias"])


def _transform(p, pre, x, heads, mask_pad, attn_mask, memory, memory_mask_pad):
    """U (L, B, out) of one layer. pre = '<layer>.transform_module'."""
    has_norm = pre + ".layer_norm.weight" in p
    if pre + ".alpha" not in p:  # projected linear: U = LN(x W1) W3
        z = x @ p[pre + ".linear1.weight"].t()
        if has_norm:
            z = _layer_norm(z, p, pre + ".layer_norm")
        return z @ p[pre + ".linear2.weight"].t()
    L, B = x.shape[:2]
    source = x if memory is None else torch.cat([memory, x])
    S = source.shape[0]
    z = source @ p[pre + ".linear1.weight"].t()           # (S, B, P)
    kv = z @ p[pre + ".linear2.weight"].t()
    P = z.shape[-1]
    k, v = kv[..., :P], kv[..., P:]
    q = z[S - L:]
    hd = P // heads
    q = q.reshape(L, B, heads, hd)
    k = k.reshape(S, B, heads, hd)
    v = v.reshape(S, B, heads, hd)
    scores = torch.einsum("tbhd,sbhd->bhts", q, k) / math.sqrt(hd)
    if attn_mask is not None:
        scores = scores + attn_mask
    pad = torch.zeros(S, B, dtype=torch.bool)
    if mask_pad is not None:
        pad[S - L:] = mask_pad.bool()
    if memory_mask_pad is not None and S > L:
        pad[:S - L] = memory_mask_pad.bool()
    scores = scores.masked_fill(pad.t()[:, None, None, :], float("-inf"))
    attended = torch.einsum("bhts,sbhd->tbhd", scores.softmax(-1), v).reshape(L, B, P)
    out = p[pre + ".alpha"] * attended + z[S - L:]       # ReZero residual
    if has_norm:  # the official stack builds its attention with post-norm
        out = _layer_norm(out, p, pre + ".layer_norm")
    return out @ p[pre + ".linear3.weight"].t()


def _recurrence(U, x, v, b, c0, d, dirs, alpha, mask_pad):
    """SRU: f = σ(u1 + v_f c + b_f), r = σ(u2 + v_r c + b_r), c = f c + (1-f) u0,
    h = r c + (1-r) x', x' = alpha x (k = 3) or u3 (k = 4); padded steps keep c, output 0."""
    L, B = U.shape[:2]
    k = U.shape[-1] // (dirs * d)
    U = U.reshape(L, B, dirs, d, k)
    v_f, v_r = v.reshape(2, dirs, d)
    b_f, b_r = b.reshape(2, dirs, d)
    skip = U[..., 3] if k == 4 else alpha * x.reshape(L, B, dirs, d)
    c0 = torch.zeros(B, dirs, d, dtype=U.dtype) if c0 is None else c0.reshape(B, dirs, d)
    real = torch.ones(L, B, 1, dtype=U.dtype) if mask_pad is None else \
        (~mask_pad.bool()).to(U.dtype).unsqueeze(-1)
    hs, last = [[None] * L for _ in range(dirs)], []
    for di in range(dirs):
        c = c0[:, di]
        for t in (range(L) if di == 0 else reversed(range(L))):
            u = U[t, :, di]
            f = torch.sigmoid(u[..., 1] + v_f[di] * c + b_f[di])
            r = torch.sigmoid(u[..., 2] + v_r[di] * c + b_r[di])
            c_new = f * c + (1 - f) * u[..., 0]
            c = real[t] * c_new + (1 - real[t]) * c
            hs[di][t] = real[t] * (r * c + (1 - r) * skip[t, :, di])
        last.append(c)
    h = torch.stack([torch.stack(hs[di]) for di in range(dirs)], dim=2).reshape(L, B, dirs * d)
    return h, torch.stack(last, dim=1).reshape(B, dirs * d)


def srupp_reference(model, input, c0=None, mask_pad=None, attn_mask=None, memory=None,
                    memory_mask_pad=None):
    """(h, c (layers, B, dirs*d)) of ``model`` (an sru.SRUpp) in eval mode, from its parameters."""
    p = dict(model.named_parameters())
    p.update(dict(model.named_buffers()))
    x = input if "input_to_hidden.weight" not in p else input @ p["input_to_hidden.weight"].t()
    dirs = 2 if model.bidirectional else 1
    cs = []
    for i, cell in enumerate(model.rnn_lst):
        pre = f"rnn_lst.{i}"
        residual = x
        has_norm = pre + ".layer_norm.weight" in p
        if has_norm and not cell.normalize_after:
            x = _layer_norm(x, p, pre + ".layer_norm")
        U = _transform(p, pre + ".transform_module", x, model.num_heads, mask_pad, attn_mask,
                       None if memory is None else memory[i], memory_mask_pad)
        alpha = p[pre + ".scale_x"][0] if cell.rescale else 1.0
        h, c = _recurrence(U, residual, p[pre + ".weight_c"], p[pre + ".bias"],
                           None if c0 is None else c0[i], model.hidden_size, dirs, alpha, mask_pad)
        if has_norm and cell.normalize_after:
            h = _layer_norm(h, p, pre + ".layer_norm")
        x = h
        cs.append(c)
    return x, torch.stack(cs)
