"""Benchmarks of the deployment routes (docs/deploy.md): ``python -m bench.deploy.speed``."""
