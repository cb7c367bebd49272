"""Write the official-SRU++ comparison cases under tests/fixtures/srupp/ (float64, tiny).

This command must import the OFFICIAL package, not this repository's ``sru``, so it is a script (its
sys.path[0] is scripts/, not the checkout) rather than a module run with ``-m``:

    pip install --no-deps --target /tmp/sru3 sru==3.0.0.dev6
    PYTHONPATH=/tmp/sru3:. python scripts/make_srupp_fixtures.py

(it compiles the official package's small CPU extension on first import; needs ninja + g++).
The cases: bench/srupp_fixtures.py.
"""
import argparse
import os
import sys

import torch

from bench.srupp_fixtures import CASES, FIXTURES, PLAIN_SRU_CASES, make_case, make_plain_sru_case


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=FIXTURES)
    args = parser.parse_args(argv)
    import sru
    if not getattr(sru, "__version__", "").startswith("3.0.0"):
        sys.exit(f"expected the official sru 3.0.0.dev6 on PYTHONPATH, imported {sru.__file__}")
    os.makedirs(args.out, exist_ok=True)
    for seed, (name, (kwargs, input_size, length, batch, extra)) in enumerate(CASES.items()):
        case = make_case(name, kwargs, input_size, length, batch, extra, seed)
        path = os.path.join(args.out, f"{name}.pt")
        torch.save(case, path, _use_new_zipfile_serialization=False)  # legacy: no per-tensor zip records, ~3x smaller
        print(f"{path}: {os.path.getsize(path)} bytes")
    os.makedirs(os.path.join(args.out, "plain_sru"), exist_ok=True)
    for seed, (name, (kwargs, input_size, length, batch)) in enumerate(PLAIN_SRU_CASES.items()):
        case = make_plain_sru_case(name, kwargs, input_size, length, batch, 100 + seed)
        path = os.path.join(args.out, "plain_sru", f"{name}.pt")
        torch.save(case, path, _use_new_zipfile_serialization=False)
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
