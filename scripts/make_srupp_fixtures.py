"""Write the official-SRU++ comparison cases under tests/fixtures/srupp/ (float64, tiny).

This command must import the OFFICIAL package, not this repository's ``sru``:

    pip install --no-deps --target /tmp/sru3 sru==3.0.0.dev6
    PYTHONPATH=/tmp/sru3 python scripts/make_srupp_fixtures.py

(it compiles the official package's small CPU extension on first import; needs ninja + g++).
The cases: bench/srupp_fixtures.py.
"""
from bench.srupp_fixtures import main

if __name__ == "__main__":
    main()
