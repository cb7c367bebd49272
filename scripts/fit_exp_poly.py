"""Fit the polynomial of the fused CPU kernel's float exp (sru/ops/cpu/sru_math.h, fast_exp).

    python scripts/fit_exp_poly.py

Prints the coefficients to paste into fast_exp and both errors (how: bench/cpu_kernel.py, fit_exp_poly).
"""
from bench.cpu_kernel import fit_exp_poly as main

if __name__ == "__main__":
    main()
