"""Benchmarks of the commands' behaviour under load and on large input: the default thread
count on a shared machine (``python -m bench.reliability.threads``) and long-audio decoding memory
(``python -m bench.reliability.long_audio``). Their numbers are in docs/benchmarks.md and docs/inference.md."""
