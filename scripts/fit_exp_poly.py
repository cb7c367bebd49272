"""Fit the polynomial of the fused CPU kernel's float exp (sru/ops/cpu/sru_math.h, fast_exp).

    python scripts/fit_exp_poly.py

Prints the coefficients to paste into fast_exp and both errors (how: bench/exp_poly.py).
"""
from bench.exp_poly import main

if __name__ == "__main__":
    main()
