"""The fused CPU recurrence kernel (sru/ops/cpu/sru_recurrence.cpp) timed on its own.

``kernel_vs_gemm`` (``python -m bench.cpu_kernel``): for one unidirectional layer with k = 3, the
forward GEMM x @ W, the two backward GEMMs, the recurrence forward without (inference) and with the
stored states (training), and its backward, interleaved in one loop so machine noise hits all alike.
Reports median and minimum per call, and the recurrence's cost as a fraction of the GEMMs: the layer
can only be as close to its GEMM bound as these fractions allow.

``ab_builds`` (``scripts/ab_kernel.py``): two builds of the kernel source, compiled side by side with
the flags build.py uses, on the same inputs; rounds interleaved, the speedup is the median over rounds
of old/new. Per shape: the forward in inference (states not stored) and in training (every step's c
stored), and the backward; k = 3, skip term on, unidirectional unless the shape says x2. Default: one
thread, this thread's CPU time (robust to other processes), the kernel called back to back (its inputs
hot in cache). ``after_matmul``: before every timed call x @ W writes U, as in a real layer, so the
kernel finds U where the matmul's threads left it; each call is then timed alone by the wall clock
(with several threads the work is on threads the calling thread's CPU time would not see).

``fit_exp_poly`` (``python -m bench.cpu_kernel --fit-exp-poly``): the polynomial of the kernel's float exp
(sru_math.h, fast_exp): prints the coefficients to paste into fast_exp and both errors.

    python -m bench.cpu_kernel [--length 64] [--batch 32] [--width 512] [--threads 2] [--repeats 30]
    python -m bench.cpu_kernel --fit-exp-poly
"""
import ctypes
import statistics
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import torch

from bench.harness import bench_parser, interleaved, make_timer, markdown_table, paired_ratio
from sru.ops.backends import compile_flags, cpu_autograd, cpu_kernel, load_error, load_library

SKIP_SCALED_X, recurrence_bwd, recurrence_fwd = (cpu_autograd.SKIP_SCALED_X, cpu_autograd.recurrence_bwd,
                                                 cpu_autograd.recurrence_fwd)
SruArgs, configure_library = cpu_kernel.SruArgs, cpu_kernel.configure_library

HEADERS = Path(__file__).resolve().parents[1] / "sru" / "ops" / "cpu"
AB_SHAPES = [(32, 32, 256, 1), (64, 32, 512, 1), (128, 32, 512, 1), (256, 8, 1024, 1), (35, 32, 910, 1),
             (64, 32, 512, 2), (32, 8, 256, 1), (32, 2, 256, 1), (1, 32, 512, 1), (1, 1, 512, 1)]  # (L, B, d, dirs)


def kernel_vs_gemm(length: int, batch: int, width: int, threads: int, repeats: int) -> None:
    """Print the per-call times and the recurrence / GEMM fractions (median and minimum)."""
    if load_library() is None:
        raise SystemExit(f"the fused CPU kernel is unavailable: {load_error()}")
    torch.set_num_threads(threads)
    L, B, D = length, batch, width
    g = torch.Generator().manual_seed(0)
    x = torch.randn(L * B, D, generator=g)
    W = torch.randn(D, 3 * D, generator=g) / D ** 0.5
    U = (x @ W).view(L, B, 3 * D)
    weight_c, bias = torch.randn(2 * D, generator=g), torch.zeros(2 * D)
    grad_U, grad_h = torch.randn(L * B, 3 * D, generator=g), torch.randn(L, B, D, generator=g)

    def fwd(store_c):
        return recurrence_fwd(U, x.view(L, B, D), weight_c, bias, None, None, None, D, False,
                              SKIP_SCALED_X, False, 1.0, store_c)

    c_all = fwd(True)[2]
    cases = {
        "gemm fwd": lambda: x @ W,
        "gemm bwd (2 GEMMs)": lambda: (grad_U @ W.t(), x.t() @ grad_U),
        "recurrence fwd, inference": lambda: fwd(False),
        "recurrence fwd, training": lambda: fwd(True),
        "recurrence bwd": lambda: recurrence_bwd(grad_h, None, U, x.view(L, B, D), weight_c,
                                                 bias, None, None, None, c_all, D, False,
                                                 SKIP_SCALED_X, False, 1.0, False),
    }
    for fn in cases.values():  # warm-up: page in buffers, start threads
        fn()
    times = {name: [s * 1e3 for s in samples]
             for name, samples in interleaved(cases, make_timer("cpu"), repeats).items()}

    print(f"L={L} B={B} d={D}, {threads} threads, {repeats} interleaved repeats")
    for stat in (statistics.median, min):
        t = {name: stat(v) for name, v in times.items()}
        print(f"{stat.__name__:>6}: " + ", ".join(f"{n} {v:.2f} ms" for n, v in t.items()))
        gemm_train = t["gemm fwd"] + t["gemm bwd (2 GEMMs)"]
        rec_train = t["recurrence fwd, training"] + t["recurrence bwd"]
        print(f"        inference: recurrence / GEMM = {t['recurrence fwd, inference'] / t['gemm fwd']:.3f}; "
              f"training: recurrence fwd+bwd / 3 GEMMs = {rec_train / gemm_train:.3f}")


def build(source: Path, out: Path) -> ctypes.CDLL:
    subprocess.run(["g++", *compile_flags(), "-shared", "-fPIC", f"-I{HEADERS}", str(source), "-o", str(out)],
                   check=True)
    return configure_library(ctypes.CDLL(str(out)))


def backward_buffers(L: int, B: int, D: int, c_all: torch.Tensor) -> dict:
    """The backward's inputs beyond the forward's (the stored c of a forward run) and outputs."""
    return {"c_all": c_all, "grad_h": torch.randn(L * B, D), "grad_U": torch.empty(L * B, 3 * D),
            "grad_x": torch.empty(L * B, D), "grad_weight_c": torch.empty(2 * D), "grad_bias": torch.empty(2 * D),
            "grad_partial": torch.empty(B, 4, D), "grad_c0": torch.empty(B, D)}


def ab_builds(old: Path, new: Path, rounds: int, threads: int, after_matmul: bool) -> None:
    """Print one Markdown row per shape and mode: old and new µs per call and the speedup."""
    if threads > 1 and not after_matmul:
        raise ValueError("--threads > 1 needs --after-matmul (wall-clock timing of single calls)")
    torch.set_num_threads(threads)
    rounds = rounds * (4 if after_matmul else 1)  # single calls: more samples
    with tempfile.TemporaryDirectory() as tmp:
        libs = {"old": build(old, Path(tmp) / "old.so"), "new": build(new, Path(tmp) / "new.so")}
        how = (f"{threads} thread(s), right after x @ W, wall clock" if after_matmul
               else "1 thread, back to back, thread CPU time")
        print(f"{how}, {rounds} interleaved rounds\n")
        print(markdown_table(["shape", "mode", "old µs", "new µs", "speedup (median of old/new)"], []), flush=True)
        for L, B, d, dirs in AB_SHAPES:
            D = dirs * d
            U, x, h = torch.randn(L * B, 3 * D), torch.randn(L * B, D), torch.empty(L * B, D)
            weight = torch.randn(D, 3 * D) / D ** 0.5
            weight_c, bias, c_last = torch.randn(2 * D), torch.randn(2 * D), torch.empty(B, D)
            for mode in ("inference", "training", "backward"):
                c_all = torch.empty(L * B, D) if mode != "inference" else None
                args = SruArgs(length=L, batch=B, num_threads=threads, hidden=d, dirs=dirs, k=3, skip_mode=1,
                               scale_x=1.0, U=U.data_ptr(), x=x.data_ptr(), weight_c=weight_c.data_ptr(),
                               bias=bias.data_ptr(), h=h.data_ptr(), c_last=c_last.data_ptr(),
                               c_all=None if c_all is None else c_all.data_ptr())
                entry = {name: lib.sru_forward_f32 for name, lib in libs.items()}
                if mode == "backward":
                    libs["old"].sru_forward_f32(ctypes.byref(args))  # the states the backward reads
                    buffers = backward_buffers(L, B, D, c_all)  # kept alive: args holds raw pointers into them
                    for name, tensor in buffers.items():
                        setattr(args, name, tensor.data_ptr())
                    entry = {name: lib.sru_backward_f32 for name, lib in libs.items()}
                calls = {name: (lambda f=f: f(ctypes.byref(args))) for name, f in entry.items()}
                if after_matmul:
                    # each sample: x @ W writes U untimed, then one call, timed on the wall clock
                    def after(call, timer=make_timer("cpu")):
                        torch.mm(x, weight, out=U)
                        return timer(call, 1)
                    samples = interleaved({n: (lambda c=c: after(c)) for n, c in calls.items()},
                                          lambda measure, _: measure(), rounds)
                else:
                    number = max(3, int(2e7 / (L * B * D)))
                    samples = interleaved(calls, make_timer("cpu", "cpu"), rounds, dict.fromkeys(calls, number))
                old_us, new_us = (1e6 * statistics.median(samples[name]) for name in ("old", "new"))
                print(f"| L={L} B={B} d={d}{' x2 directions' if dirs == 2 else ''} | {mode} | {old_us:.1f} | "
                      f"{new_us:.1f} | {paired_ratio(samples['old'], samples['new']):.2f}x |", flush=True)

# Fit the polynomial of the fused CPU kernel's float exp (sru/ops/cpu/sru_math.h, fast_exp).
#
# (``python -m bench.cpu_kernel --fit-exp-poly``, ``fit_exp_poly``)
#
# After Cody-Waite range reduction exp(x) = 2^n exp(r) with |r| <= ln(2)/2, and exp(r) is
# 1 + r + r^2 q(r) with q of degree 4. q is fitted for the smallest maximum *relative* error of exp(r)
# (iteratively reweighted least squares on Chebyshev points, which converges to near-minimax), then
# checked in float32 with the kernel's Estrin evaluation order against float64 numpy. Prints the
# coefficients to paste into fast_exp and both errors (float64 fit; float32 evaluation, which is
# float rounding: ~1 ulp = 1.19e-7).
HALF_LN2 = np.log(2) / 2


def fit_exp_q(degree: int = 4, rounds: int = 60) -> np.ndarray:
    r = np.cos(np.linspace(0, np.pi, 4001)) * HALF_LN2
    r = r[np.abs(r) > 1e-6]
    target = (np.expm1(r) - r) / r ** 2
    scale = r ** 2 / np.exp(r)  # an error in q times this is the relative error of exp(r)
    weights = np.ones_like(r)
    for _ in range(rounds):  # reweight toward the worst points: least squares -> minimax
        V = np.vander(r, degree + 1, increasing=True)
        coeffs, *_ = np.linalg.lstsq(V * (scale * weights)[:, None], target * scale * weights, rcond=None)
        err = np.abs((V @ coeffs - target) * scale)
        weights = weights * (err / err.max()) ** 0.3 + 1e-12
    print(f"q coefficients (r^0..r^{degree}): {[float(c) for c in coeffs]}")
    print(f"max relative error of exp(r), float64 evaluation: {err.max():.2e}")
    return coeffs


def float32_error(c: np.ndarray) -> float:
    r = np.linspace(-HALF_LN2, HALF_LN2, 400001).astype(np.float32)
    c = c.astype(np.float32)
    r2 = r * r
    r4 = r2 * r2
    q = (c[0] + c[1] * r) + r2 * (c[2] + c[3] * r) + r4 * c[4]  # the kernel's order
    p = (np.float32(1) + r) + r2 * q
    return float(np.abs(p.astype(np.float64) / np.exp(r.astype(np.float64)) - 1).max())


def fit_exp_poly() -> None:
    coeffs = fit_exp_q()
    print(f"max relative error, float32 evaluation (Estrin, as in the kernel): {float32_error(coeffs):.2e}")


def main() -> None:
    parser = bench_parser(__doc__, threads=2, repeats=30, length=64, batch=32, width=512)
    parser.add_argument("--fit-exp-poly", action="store_true", help="fit fast_exp's polynomial instead of timing")
    args = parser.parse_args()
    if args.fit_exp_poly:
        fit_exp_poly()
    else:
        kernel_vs_gemm(args.length, args.batch, args.width, args.threads, args.repeats)


if __name__ == "__main__":
    main()
