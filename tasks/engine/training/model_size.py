"""A model too large for this machine is refused before the allocation that would not fit.

    with memory_budget(device, trainer_cfg.optimizer):
        model = task.build_model()      # each tensor factory call is counted before it allocates

The schemas bound each size from below only: ``model.hidden_size=200000`` passed every check and then
failed inside ``torch.empty`` asking for hundreds of GB (a long traceback after the data had loaded), and a
size just under the RAM was allocated and got the process killed by the kernel once the optimizer state
came on top. While the model is built, a torch function mode adds up the bytes every tensor factory
(``torch.empty``, ``zeros``, ...) is about to allocate; training needs that many for the weights, as many
again for their gradients, and one or two more for the optimizer's state (momentum; Adam's two moments).
When that exceeds the memory the model lives in (this machine's RAM, or the GPU's), the build stops in
one line, before the tensor is allocated. Activations come on top, so a model that passes may still not
fit; one refused here surely would not. (The ``meta`` device cannot stand in: the layers' initialisation
reads values out of tensors.)
"""
from __future__ import annotations

import contextlib
import math
import os
from typing import Any, Iterator, Tuple

import torch
from torch.overrides import TorchFunctionMode

from tasks.engine.errors import ConfigError

GB = 1 << 30
FACTORIES = {torch.empty, torch.zeros, torch.ones, torch.full, torch.rand, torch.randn, torch.randint}
ADAPTIVE = ("adam", "adamw", "adamax", "radam")  # two moments per weight


def copies_per_weight(optimizer: Any) -> int:
    """Weights + gradients + the optimizer's state, in units of the model's size."""
    name, momentum = getattr(optimizer, "name", "sgd"), getattr(optimizer, "momentum", 0) or 0
    return 2 + (2 if name in ADAPTIVE else 1 if momentum > 0 else 0)


def memory_of(device: torch.device) -> Tuple[int, str]:
    """(bytes, what they are) of the memory the model's weights live in."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory, f"the GPU {device}"
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's RAM"


def requested_bytes(func, args, kwargs) -> int:
    shape = args[0] if args and isinstance(args[0], (tuple, list, torch.Size)) else args or kwargs.get("size", ())
    if func is torch.randint:  # randint(high, size) / randint(low, high, size)
        shape = kwargs.get("size") or next((a for a in args if isinstance(a, (tuple, list, torch.Size))), ())
    if not all(isinstance(n, int) for n in shape):
        return 0
    dtype = kwargs.get("dtype") or (torch.int64 if func is torch.randint else torch.get_default_dtype())
    return math.prod(shape) * dtype.itemsize


class _Budget(TorchFunctionMode):
    def __init__(self, copies: int, have: int, where: str):
        super().__init__()
        self.copies, self.have, self.where, self.total = copies, have, where, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES:
            self.total += requested_bytes(func, args, kwargs)
            if self.total * self.copies > self.have:
                raise ConfigError(
                    f"the model does not fit: training it needs more than {self.total * self.copies / GB:,.1f} GB "
                    f"(weights, gradients and optimizer state), and {self.where} has {self.have / GB:,.1f} GB; "
                    f"lower model.hidden_size / model.num_layers (or the vocabulary, e.g. task.data.max_vocab)")
        return func(*args, **kwargs)


@contextlib.contextmanager
def memory_budget(device: torch.device, optimizer: Any) -> Iterator[None]:
    have, where = memory_of(device)
    with _Budget(copies_per_weight(optimizer), have, where):
        yield
