"""The SRU recurrence over packed (ragged) batches, without padded compute.

A layer's forward runs over a *layout* (``SRUCell.forward_layout``): ``PaddedLayout``, the trivial one, for
(L, B, .) time-major tensors with an optional ``mask_pad``, or ``PackedLayout`` for packed rows. Both answer
the same questions: how many sequences (``batch``), how a per-sequence mask reaches the tokens
(``per_token``), the padding the masks carry (``masks``), the CPU kernel's row layout (``kernel_args``) and
which recurrence entry runs (``recurrence``).

A packed batch is a ``PackedSequence``'s time-major layout: sequences sorted by decreasing
length, step t's tokens are the ``batch_sizes[t]`` rows that follow step t-1's, N = the sum of
``batch_sizes`` tokens in all. ``PackedLayout`` holds that layout once per batch (every layer
of a stack reuses it); ``elementwise_recurrence_packed`` runs the recurrence on it with any
backend's ``packed`` entry (sru/ops/backends.py): the reference loop (sru/ops/reference.py),
the CPU kernel (the same C++ loops with a row layout that skips absent rows,
sru/ops/cpu/packed.py) or Triton (sru/ops/triton/packed.py). Padding is never materialised: U has N rows, not L*B.
"""
from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor

from .spec import SKIP_SCALED_X, Masks, RecurrenceSpec


class PaddedLayout:
    """The trivial layout: (L, B, .) time-major tensors, ``mask_pad`` (L, B) nonzero = padded step (or None)."""

    kernel_args = None  # the CPU kernel's dense (L, B) rows

    def __init__(self, batch: int, mask_pad: Optional[Tensor] = None):
        self.batch, self.mask_pad = batch, mask_pad

    @staticmethod
    def per_token(mask: Tensor) -> Tensor:
        """A per-sequence (B, d) mask as it multiplies (L, B, d) tokens: itself, broadcast over time."""
        return mask

    def masks(self, mask_c: Optional[Tensor]) -> Masks:
        return Masks(mask_c, self.mask_pad)

    def recurrence(self, U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor, c0: Optional[Tensor],
                   hidden_size: int, mask_c: Optional[Tensor], **options) -> Tuple[Tensor, Tensor]:
        """``sru.ops.elementwise_recurrence`` with this layout's padding (``options``: its keywords)."""
        from . import elementwise_recurrence  # the package imports this module's users, not this module

        return elementwise_recurrence(U, x, weight_c, bias, c0, hidden_size, mask_c=mask_c,
                                      mask_pad=self.mask_pad, **options)


class PackedLayout:
    """Where each step's rows are in a packed batch.

    batch_sizes (L,) and step_offsets (L+1,): int64 CPU tensors (what the CPU kernel reads);
    sizes: the same as a Python list; length, batch, tokens: L, B = batch_sizes[0] and N as
    ints; row_batch (N,): the sorted sequence each packed row belongs to, on ``device`` (gathers
    per-sequence dropout masks onto tokens).
    """

    def __init__(self, batch_sizes: Tensor, device: Union[str, torch.device] = "cpu"):
        if not isinstance(batch_sizes, Tensor) or batch_sizes.dim() != 1 or batch_sizes.numel() == 0 \
                or batch_sizes.is_floating_point():
            raise ValueError("packed input expected batch_sizes as a non-empty 1-D integer tensor "
                             "(a PackedSequence's batch_sizes), got "
                             f"{batch_sizes if not isinstance(batch_sizes, Tensor) else tuple(batch_sizes.shape)}")
        sizes = batch_sizes.detach().to("cpu", torch.int64).contiguous()
        self.sizes: List[int] = sizes.tolist()
        if self.sizes[-1] < 1 or any(a < b for a, b in zip(self.sizes, self.sizes[1:])):
            raise ValueError("packed input expected batch_sizes >= 1 and non-increasing (sequences "
                             "sorted by decreasing length, as pack_padded_sequence makes them), got "
                             f"{self.sizes}")
        self.batch_sizes = sizes
        self.step_offsets = torch.zeros(len(self.sizes) + 1, dtype=torch.int64)
        torch.cumsum(sizes, 0, out=self.step_offsets[1:])
        self.length, self.batch, self.tokens = len(self.sizes), self.sizes[0], int(self.step_offsets[-1])
        starts = torch.repeat_interleave(self.step_offsets[:-1], sizes)
        self.row_batch = (torch.arange(self.tokens) - starts).to(device)
        self._on_device = {}

    @property
    def kernel_args(self) -> Tuple[Tensor, Tensor]:
        """``(batch_sizes, step_offsets)`` as the CPU kernel takes them (sru/ops/cpu/kernel.py)."""
        return self.batch_sizes, self.step_offsets

    mask_pad = None  # no padding: absent rows are never computed

    def per_token(self, mask: Tensor) -> Tensor:
        """A per-sequence (B, d) mask gathered onto its (N, d) packed rows."""
        return mask[self.row_batch]

    @staticmethod
    def masks(mask_c: Optional[Tensor]) -> Masks:
        return Masks(mask_c)

    def recurrence(self, U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor, c0: Optional[Tensor],
                   hidden_size: int, mask_c: Optional[Tensor], **options) -> Tuple[Tensor, Tensor]:
        """``elementwise_recurrence_packed`` over this layout (``options``: its keywords)."""
        return elementwise_recurrence_packed(U, x, weight_c, bias, c0, hidden_size, self, mask_c=mask_c, **options)

    def on(self, device: torch.device) -> Tuple[Tensor, Tensor]:
        """``(batch_sizes, step_offsets)`` on ``device`` (Triton), copied once per device."""
        key = str(device)
        if key not in self._on_device:
            self._on_device[key] = (self.batch_sizes.to(device), self.step_offsets.to(device))
        return self._on_device[key]


def check_packed(U, x, weight_c, bias, c0, masks: Masks, spec: RecurrenceSpec,
                 layout: PackedLayout) -> None:
    """One ValueError naming expected vs received for packed (N, .) inputs."""
    width, tokens = spec.width, layout.tokens
    if not isinstance(U, Tensor) or U.dim() != 2 or U.shape[0] != tokens \
            or U.shape[1] not in (3 * width, 4 * width):
        got = tuple(U.shape) if isinstance(U, Tensor) else type(U).__name__
        raise ValueError(f"packed U must have shape (tokens, dirs*hidden_size*k) = ({tokens}, "
                         f"{3 * width} or {4 * width}) (tokens = sum(batch_sizes)), received {got}")
    if spec.skip_mode(spec.k(U)) == SKIP_SCALED_X and (x is None or tuple(x.shape) != (tokens, width)):
        got = None if x is None else tuple(x.shape)
        raise ValueError(f"packed x (the skip input) must have shape {(tokens, width)} when "
                         f"has_skip_term=True and k == 3, received {got}")
    if tuple(weight_c.shape) != (2 * width,):
        raise ValueError(f"packed input takes weight_c of shape {(2 * width,)} (per-step gate "
                         f"weights need the padded path), received {tuple(weight_c.shape)}")
    if tuple(bias.shape) != (2 * width,):
        raise ValueError(f"bias must have shape {(2 * width,)}, received {tuple(bias.shape)}")
    for name, t in (("c0", c0), ("mask_c", masks.mask_c)):
        if t is not None and tuple(t.shape) != (layout.batch, width):
            raise ValueError(f"packed {name} must have shape (batch, dirs*hidden_size) = "
                             f"{(layout.batch, width)} in the sorted order, received {tuple(t.shape)}")


def elementwise_recurrence_packed(
    U: Tensor,
    x: Optional[Tensor],
    weight_c: Tensor,
    bias: Tensor,
    c0: Optional[Tensor],
    hidden_size: int,
    layout: Union[PackedLayout, Tensor],
    bidirectional: bool = False,
    has_skip_term: bool = True,
    scale_x: float = 1.0,
    activation: Union[str, int] = "none",
    mask_c: Optional[Tensor] = None,
    backend: str = "auto",
) -> Tuple[Tensor, Tensor]:
    """Return ``(h, c_last)``: h (N, dirs*d) in the packed row order, c_last (B, dirs*d) in the
    sorted sequence order (B = batch_sizes[0]).

    U (N, dirs*d*k) and x (N, dirs*d) are packed rows (a PackedSequence's ``data`` layout);
    ``layout`` is a ``PackedLayout`` or the ``batch_sizes`` tensor itself; c0 and mask_c are
    (B, dirs*d) in the sorted order; weight_c is the shared (2*dirs*d,) vector (per-step gate
    weights are not supported packed). Other arguments as ``sru.ops.elementwise_recurrence``.
    """
    from .backends import check_backend_name, resolve

    if not isinstance(layout, PackedLayout):
        layout = PackedLayout(layout, U.device if isinstance(U, Tensor) else "cpu")
    check_backend_name(backend)
    spec = RecurrenceSpec(hidden_size, bidirectional, has_skip_term, scale_x, activation)
    masks = Masks(mask_c)
    check_packed(U, x, weight_c, bias, c0, masks, spec, layout)
    # The export form has no packed scan: it runs the reference loop, unrolled to this batch's L.
    return resolve(backend, U).packed(U, x, weight_c, bias, c0, masks, spec, layout)
