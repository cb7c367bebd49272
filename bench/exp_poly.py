"""Fit the polynomial of the fused CPU kernel's float exp (sru/ops/cpu/sru_math.h, fast_exp).

(``scripts/fit_exp_poly.py``)

After Cody-Waite range reduction exp(x) = 2^n exp(r) with |r| <= ln(2)/2, and exp(r) is
1 + r + r^2 q(r) with q of degree 4. q is fitted for the smallest maximum *relative* error of exp(r)
(iteratively reweighted least squares on Chebyshev points, which converges to near-minimax), then
checked in float32 with the kernel's Estrin evaluation order against float64 numpy. Prints the
coefficients to paste into fast_exp and both errors (float64 fit; float32 evaluation, which is
float rounding: ~1 ulp = 1.19e-7).
"""
import numpy as np

HALF_LN2 = np.log(2) / 2


def fit(degree: int = 4, rounds: int = 60) -> np.ndarray:
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


def main() -> None:
    coeffs = fit()
    print(f"max relative error, float32 evaluation (Estrin, as in the kernel): {float32_error(coeffs):.2e}")
