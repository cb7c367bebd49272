"""The speed pages of the documentation (docs/speed/*.md, docs/benchmarks.md), generated from the
measurement records committed under docs/bench/: ``python -m bench.docs_pages`` rewrites them."""
