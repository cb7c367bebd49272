"""Errors of the recurrence backends that callers may catch by type (kept import-light: no
triton, no compiled code)."""


class TritonKernelError(RuntimeError):
    """A Triton kernel of the SRU recurrence failed to compile or launch on this GPU; the
    message names the variant and the way forward, ``backend="reference"``
    (sru/ops/triton/launch.py)."""
