"""Helpers shared by the SRU module tests (tests/test_modules*.py)."""
import functools

import pytest
import torch

from sru import elementwise_recurrence
@functools.lru_cache(maxsize=None)
def _backend_error(name):
    """None if the backend runs a tiny recurrence here, else the reason it does not."""
    try:
        elementwise_recurrence(torch.zeros(2, 1, 3), None, torch.zeros(2), torch.zeros(2), None, 1,
                               has_skip_term=False, backend=name)
        return None
    except Exception as err:  # a kernel that cannot build here is skipped, with the reason shown
        return f"{type(err).__name__}: {err}"


FUSED = [pytest.param(name, marks=pytest.mark.skipif(_backend_error(name) is not None,
                                                     reason=str(_backend_error(name))))
         for name in ("auto", "cpu")]
BACKENDS = ["reference"] + FUSED


def randomize(module, scale=0.5, seed=0):
    """Random values in every parameter, so that no test leans on the init's structure."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale)
    return module


def grads_of(module, *tensors):
    return [t.grad for t in tensors] + [p.grad for p in module.parameters() if p.requires_grad]


def decode_step_by_step(rnn, x):
    """(full-sequence (h, c), step-by-step (h, c)) of ``rnn`` on x (L, B, d) in the current grad
    mode: the steps feed x[t:t+1] one at a time with the state carried, as a decoder does."""
    h_full, c_full = rnn(x)
    c, steps = None, []
    for t in range(x.size(0)):
        h_t, c = rnn(x[t:t + 1], c)
        steps.append(h_t)
    return (h_full, c_full), (torch.cat(steps), c)

