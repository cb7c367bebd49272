"""One description of the SRU recurrence that every backend carries: ``RecurrenceSpec``.

A backend module (sru/ops/backends.py) exposes two entries with one signature each:

    padded(U, x, weight_c, bias, c0, masks, spec)          U (L, B, dirs*d*k)
    packed(U, x, weight_c, bias, c0, masks, spec, layout)  U (N, dirs*d*k), a PackedLayout

``masks`` is a ``Masks(mask_c, mask_pad)``; ``spec`` holds what is fixed for a layer (hidden
size, directions, skip term, scale_x, activation), validated once when it is built. Only the
``torch.library`` custom ops and the Triton kernels keep flat argument lists, because their
registries need them. The flat signature the public functions take (``elementwise_recurrence``,
``elementwise_recurrence_reference``, ...) is turned into (tensors, masks, spec) in one place:
``split_flat``. Layouts: sru/ops/reference.py, docs/spec.md#memory-layout.
"""
from dataclasses import dataclass
from typing import Callable, NamedTuple, Optional, Tuple, Union

from torch import Tensor

from .shapes import num_directions, state_width

# How the highway/skip input x'_t is formed; shared with the C++ and Triton kernels.
NO_SKIP, SKIP_SCALED_X, SKIP_FROM_U = 0, 1, 2
_ACTIVATIONS = {"none": "none", "tanh": "tanh", 0: "none", 1: "tanh"}


@dataclass(frozen=True, eq=False)
class RecurrenceSpec:
    """What one layer's recurrence is, apart from its tensors.

    ``scale_x`` is a float, or a 1-element tensor (the module's buffer, which the Triton kernel
    reads on the device without a sync); ``activation`` is "none" or "tanh" (0 / 1 accepted, as
    in the ``sru`` package, and stored as the name)."""

    hidden_size: int
    bidirectional: bool = False
    has_skip_term: bool = True
    scale_x: Union[float, Tensor] = 1.0
    activation: str = "none"

    def __post_init__(self):
        size = self.hidden_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"hidden_size must be a positive int, received {size!r}")
        act = self.activation
        if not isinstance(act, (str, int)) or act not in _ACTIVATIONS:
            raise ValueError(f"activation must be 'none', 'tanh', 0 or 1, received {act!r}")
        object.__setattr__(self, "activation", _ACTIVATIONS[act])

    @property
    def dirs(self) -> int:
        return num_directions(self.bidirectional)

    @property
    def width(self) -> int:
        """dirs * d: the width of h and c."""
        return state_width(self.hidden_size, self.bidirectional)

    @property
    def use_tanh(self) -> bool:
        return self.activation == "tanh"

    def k(self, U: Tensor) -> int:
        """How many slices U has per state column: 3, or 4 when u3 is the skip input."""
        return U.shape[-1] // self.width

    def skip_mode(self, k: int) -> int:
        if not self.has_skip_term:
            return NO_SKIP
        return SKIP_SCALED_X if k == 3 else SKIP_FROM_U

    def skip_input(self, U: Tensor, x: Optional[Tensor]) -> Tuple[int, Optional[Tensor]]:
        """``(skip_mode, x)`` with x None unless the kernel reads it (skip from scaled x)."""
        mode = self.skip_mode(self.k(U))
        return mode, (x if mode == SKIP_SCALED_X else None)


class Masks(NamedTuple):
    """mask_c (B, dirs*d): the time-shared dropout mask on the gated term, already scaled;
    mask_pad (L, B): nonzero = padded step (None for packed input: the layout says it)."""

    mask_c: Optional[Tensor] = None
    mask_pad: Optional[Tensor] = None


def needs_history(*tensors: Optional[Tensor]) -> bool:
    """Whether a backward can follow, so the forward must keep every step's c."""
    import torch

    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _shape_error(name: str, expected, tensor: Tensor, why: str = "") -> ValueError:
    return ValueError(f"{name} must have shape {tuple(expected)}{why}, received "
                      f"{tuple(tensor.shape)}")


def check_padded(U, x, weight_c, bias, c0, masks: Masks, spec: RecurrenceSpec) -> None:
    """One ValueError naming expected vs received for padded (L, B, .) inputs."""
    if not isinstance(U, Tensor) or U.dim() != 3:
        got = tuple(U.shape) if isinstance(U, Tensor) else type(U).__name__
        raise ValueError(f"U must be 3-D (length, batch, dirs*hidden_size*k), received {got}")
    length, batch = U.shape[0], U.shape[1]
    if length < 1 or batch < 1:
        raise ValueError(f"U needs length >= 1 and batch >= 1, received {tuple(U.shape)}")
    width = spec.width
    if U.shape[2] not in (width * 3, width * 4):
        raise ValueError(f"U's last dim must be dirs*d*k (d = hidden_size) = {width}*k with k "
                         f"in {{3, 4}} (= {width * 3} or {width * 4}), received {tuple(U.shape)}")
    named = {"U": U, "weight_c": weight_c, "bias": bias, "c0": c0, "mask_c": masks.mask_c}
    if spec.skip_mode(spec.k(U)) == SKIP_SCALED_X:
        if x is None:
            raise ValueError(f"x of shape {(length, batch, width)} is required when "
                             "has_skip_term=True and k == 3 (skip input), received None")
        named["x"] = x
        if tuple(x.shape) != (length, batch, width):
            raise _shape_error("x", (length, batch, width), x, " (the skip input)")
    for name, t in named.items():
        if t is not None and (not isinstance(t, Tensor) or not t.is_floating_point()):
            got = t.dtype if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{name} must be a floating-point tensor, received {got}")
    per_step = (length, batch, width * 2)
    if tuple(weight_c.shape) not in ((2 * width,), per_step):
        raise _shape_error("weight_c", (2 * width,), weight_c, f" or per step {per_step}")
    if tuple(bias.shape) != (2 * width,):
        raise _shape_error("bias", (2 * width,), bias)
    for name, t in (("c0", c0), ("mask_c", masks.mask_c)):
        if t is not None and tuple(t.shape) != (batch, width):
            raise _shape_error(name, (batch, width), t)
    mask_pad = masks.mask_pad
    if mask_pad is not None:
        if not isinstance(mask_pad, Tensor) or tuple(mask_pad.shape) != (length, batch):
            got = tuple(mask_pad.shape) if isinstance(mask_pad, Tensor) else type(mask_pad)
            raise ValueError(f"mask_pad must have shape {(length, batch)}, received {got}")


def split_flat(U, x, weight_c, bias, c0, hidden_size, bidirectional=False, has_skip_term=True,
               scale_x=1.0, activation="none", mask_c=None, mask_pad=None) -> tuple:
    """The public flat signature, written once: returns ``(U, x, weight_c, bias, c0, masks,
    spec)`` after checking everything (one ValueError naming expected vs received)."""
    spec = RecurrenceSpec(hidden_size, bidirectional, has_skip_term, scale_x, activation)
    masks = Masks(mask_c, mask_pad)
    check_padded(U, x, weight_c, bias, c0, masks, spec)
    return U, x, weight_c, bias, c0, masks, spec


def flat_entry(padded: Callable, name: str) -> Callable:
    """A backend's ``padded`` entry under the flat signature of ``split_flat`` (what the tests,
    scripts and users of the 2.x-era helpers call); keyword-only extras pass through."""

    def call(*args, **kwargs):
        extras = {key: kwargs.pop(key) for key in list(kwargs) if key not in _FLAT_NAMES}
        return padded(*split_flat(*args, **kwargs), **extras)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = (f"``{padded.__module__}.padded`` with the flat arguments ``(U, x, weight_c, "
                    "bias, c0, hidden_size, bidirectional=False, has_skip_term=True, "
                    "scale_x=1.0, activation='none', mask_c=None, mask_pad=None)``; returns "
                    "``(h, c_last)``: h (L, B, dirs*d), c_last (B, dirs*d).")
    return call


_FLAT_NAMES = split_flat.__code__.co_varnames[:split_flat.__code__.co_argcount]
