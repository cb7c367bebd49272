"""bench.cpu_kernel (python -m bench.cpu_kernel) and its exp polynomial fit (python -m bench.cpu_kernel --fit-exp-poly)."""
import re

import numpy as np
import pytest

from bench import cpu_kernel


def test_exp_polynomial_fit_is_near_minimax_and_float32_exact_to_an_ulp(capsys):
    coeffs = cpu_kernel.fit_exp_q()
    assert "max relative error of exp(r), float64 evaluation" in capsys.readouterr().out
    # exp(r) = 1 + r + r^2 q(r): q's leading coefficients are the Taylor ones, 1/2 and 1/6
    assert coeffs[:2] == pytest.approx([0.5, 1 / 6], rel=1e-4)
    r = np.linspace(-cpu_kernel.HALF_LN2, cpu_kernel.HALF_LN2, 1001)
    fitted = 1 + r + r ** 2 * np.polynomial.polynomial.polyval(r, coeffs)
    assert np.abs(fitted / np.exp(r) - 1).max() < 1e-8
    assert cpu_kernel.float32_error(coeffs) < 2.5e-7  # float rounding: ~2 ulp of 1.19e-7


@pytest.mark.slow  # builds the fused CPU kernel on first use
def test_kernel_vs_gemm_prints_times_and_fractions(capsys):
    from bench.cpu_kernel import kernel_vs_gemm

    kernel_vs_gemm(length=4, batch=2, width=8, threads=1, repeats=2)
    out = capsys.readouterr().out
    assert "L=4 B=2 d=8, 1 threads, 2 interleaved repeats" in out
    for stat in ("median", "min"):
        assert re.search(rf"{stat}: gemm fwd [\d.]+ ms, .*recurrence bwd [\d.]+ ms", out), out
    assert len(re.findall(r"inference: recurrence / GEMM = [\d.]+; training: recurrence fwd\+bwd / 3 GEMMs = [\d.]+",
                          out)) == 2
