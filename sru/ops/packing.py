"""The SRU recurrence over packed (ragged) batches, without padded compute.

A packed batch is a ``PackedSequence``'s time-major layout: sequences sorted by decreasing
length, step t's tokens are the ``batch_sizes[t]`` rows that follow step t-1's, N = the sum of
``batch_sizes`` tokens in all. ``PackedLayout`` holds that layout once per batch (every layer
of a stack reuses it); ``elementwise_recurrence_packed`` runs the recurrence on it with any
backend: the reference loop (sru/ops/reference.py), the CPU kernel (the same C++ loops with a
row layout that skips absent rows, sru/ops/cpu/sru_recurrence.cpp) or Triton
(sru/ops/triton_packed.py). Padding is never materialised: U has N rows, not L*B.
"""
from typing import List, Optional, Tuple, Union

import torch
from torch import Tensor

from .autograd import NO_SKIP, SKIP_FROM_U, SKIP_SCALED_X, _library
from .cpu import kernel
from .reference import elementwise_recurrence_packed_reference
from .shapes import num_directions, state_width

_ACTIVATIONS = {"none": "none", "tanh": "tanh", 0: "none", 1: "tanh"}


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

    def on(self, device: torch.device) -> Tuple[Tensor, Tensor]:
        """``(batch_sizes, step_offsets)`` on ``device`` (Triton), copied once per device."""
        key = str(device)
        if key not in self._on_device:
            self._on_device[key] = (self.batch_sizes.to(device), self.step_offsets.to(device))
        return self._on_device[key]


def _check(U, x, weight_c, bias, c0, mask_c, hidden_size, layout: PackedLayout, bidirectional,
           has_skip_term, activation, backend) -> Tuple[str, int]:
    """One ValueError naming expected vs received; returns (activation name, k)."""
    from . import BACKENDS

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, received {backend!r}")
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be 'none', 'tanh', 0 or 1, received {activation!r}")
    width = state_width(hidden_size, bidirectional)
    if not isinstance(U, Tensor) or U.dim() != 2 or U.shape[0] != layout.tokens \
            or U.shape[1] not in (3 * width, 4 * width):
        got = tuple(U.shape) if isinstance(U, Tensor) else type(U).__name__
        raise ValueError(f"packed U must have shape (tokens, dirs*hidden_size*k) = ({layout.tokens}, "
                         f"{3 * width} or {4 * width}) (tokens = sum(batch_sizes)), received {got}")
    k = U.shape[1] // width
    if has_skip_term and k == 3 and (x is None or tuple(x.shape) != (layout.tokens, width)):
        got = None if x is None else tuple(x.shape)
        raise ValueError(f"packed x (the skip input) must have shape {(layout.tokens, width)} when "
                         f"has_skip_term=True and k == 3, received {got}")
    if tuple(weight_c.shape) != (2 * width,):
        raise ValueError(f"packed input takes weight_c of shape {(2 * width,)} (per-step gate "
                         f"weights need the padded path), received {tuple(weight_c.shape)}")
    if tuple(bias.shape) != (2 * width,):
        raise ValueError(f"bias must have shape {(2 * width,)}, received {tuple(bias.shape)}")
    for name, t in (("c0", c0), ("mask_c", mask_c)):
        if t is not None and tuple(t.shape) != (layout.batch, width):
            raise ValueError(f"packed {name} must have shape (batch, dirs*hidden_size) = "
                             f"{(layout.batch, width)} in the sorted order, received {tuple(t.shape)}")
    return _ACTIVATIONS[activation], k


class _PackedRecurrenceCPU(torch.autograd.Function):
    """The CPU kernel over a packed batch, with its backward (any k and skip mode)."""

    @staticmethod
    def forward(ctx, U, x, weight_c, bias, c0, mask_c, layout: PackedLayout, hidden_size: int,
                dirs: int, skip_mode: int, use_tanh: bool, scale_x: float, store_c: bool):
        h, c_last, c_all = kernel.forward(_library(), U, x, weight_c, bias, c0, mask_c, None,
                                          hidden_size, dirs, skip_mode, use_tanh, scale_x, store_c,
                                          layout.kernel_args)
        ctx.save_for_backward(U, x, weight_c, bias, c0, mask_c, c_all)
        ctx.options = (layout, hidden_size, dirs, skip_mode, use_tanh, scale_x)
        ctx.set_materialize_grads(False)
        return h, c_last

    @staticmethod
    def backward(ctx, grad_h, grad_c_last):
        U, x, weight_c, bias, c0, mask_c, c_all = ctx.saved_tensors
        layout, hidden_size, dirs, skip_mode, use_tanh, scale_x = ctx.options
        if grad_h is None:
            grad_h = U.new_zeros(layout.tokens, dirs * hidden_size)
        need_grad_mask_c = mask_c is not None and ctx.needs_input_grad[5]
        grad_U, grad_x, grad_wc, grad_bias, grad_c0, grad_mask_c = kernel.backward(
            _library(), grad_h.contiguous(),
            None if grad_c_last is None else grad_c_last.contiguous(), U, x, weight_c, bias, c0,
            mask_c, None, c_all, hidden_size, dirs, skip_mode, use_tanh, scale_x,
            need_grad_mask_c, packing=layout.kernel_args)
        return (grad_U, grad_x if skip_mode == SKIP_SCALED_X else None, grad_wc, grad_bias,
                None if c0 is None else grad_c0, grad_mask_c if need_grad_mask_c else None,
                None, None, None, None, None, None, None)


def _cpu(U, x, weight_c, bias, c0, mask_c, layout, hidden_size, dirs, k, has_skip_term,
         scale_x, activation):
    dtype = torch.float64 if U.dtype == torch.float64 else torch.float32
    skip_mode = NO_SKIP if not has_skip_term else (SKIP_SCALED_X if k == 3 else SKIP_FROM_U)
    x = x if skip_mode == SKIP_SCALED_X else None
    tensors = [None if t is None else t.to(dtype).contiguous()
               for t in (U, x, weight_c, bias, c0, mask_c)]
    store_c = torch.is_grad_enabled() and any(t is not None and t.requires_grad
                                              for t in (U, x, weight_c, bias, c0, mask_c))
    h, c_last = _PackedRecurrenceCPU.apply(*tensors, layout, hidden_size, dirs, skip_mode,
                                           activation == "tanh", float(scale_x), store_c)
    return h.to(U.dtype), c_last.to(U.dtype)


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
    if not isinstance(layout, PackedLayout):
        layout = PackedLayout(layout, U.device if isinstance(U, Tensor) else "cpu")
    activation, k = _check(U, x, weight_c, bias, c0, mask_c, hidden_size, layout, bidirectional,
                           has_skip_term, activation, backend)
    from . import _resolve_backend

    backend = _resolve_backend(backend, U)
    if backend in ("reference", "export"):  # packed export: the loop unrolls to this batch's L
        return elementwise_recurrence_packed_reference(
            U, x, weight_c, bias, c0, hidden_size, layout.sizes, bidirectional, has_skip_term,
            scale_x, activation, mask_c)
    if backend == "cpu":
        return _cpu(U, x, weight_c, bias, c0, mask_c, layout, hidden_size,
                    num_directions(bidirectional), k, has_skip_term, scale_x, activation)
    from .triton_packed import elementwise_recurrence_packed_triton

    return elementwise_recurrence_packed_triton(U, x, weight_c, bias, c0, hidden_size, layout,
                                                bidirectional, has_skip_term, scale_x,
                                                activation, mask_c)
