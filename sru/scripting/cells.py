"""What ``torch.jit.script`` compiles of ``SRUCell`` and ``SRU`` (docs/deploy.md#torchscript).

The eager forward paths call the fused kernels through ctypes, dataclasses and f-strings that
TorchScript cannot compile. Both ``forward`` methods therefore start with
``if torch.jit.is_scripting(): return self._scripted_forward(...)``: TorchScript treats that
test as a constant, compiles only the methods below, and never sees the eager code, whose
checks and messages stay as they are.

The scripted recurrence is the reference's maths (sru/ops/reference.py ``cell_step``) as a
TorchScript loop over time, held to the same specification cases as every backend (``sru.testing.CASES``,
forward and gradients: tests/test_scripted_recurrence_spec.py): it runs wherever LibTorch runs (CPU, CUDA, C++ without Python or
any extension library), with autograd. Supported, as in the official ``sru`` 2.x scripting path:
bidirectional, projection_size, layer_norm (before or after), rescale, has_skip_term, use_tanh,
num_layers, dropout / rnn_dropout (masks drawn in training mode), c0, mask_pad, batch_first,
nn_rnn_compatible_return, input_to_hidden, a single (B, d) step. Not supported: ``custom_m``
(its signature is free-form) and PackedSequence input (both raise one clear error).
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from sru.ops.precision import recurrence_dtype

# A PackedSequence as a scripted module receives one from Python: TorchScript infers a plain tuple (its
# NamedTuple type is not inferred), which matched no type of ``forward``'s signature and failed in
# TorchScript's own argument check. In the signatures of SRU and SRUpp it lets the call through to the
# scripted forward's one-line refusal ("... takes a padded tensor with mask_pad, not a PackedSequence").
PackedAsTuple = Tuple[Tensor, Tensor, Optional[Tensor], Optional[Tensor]]


def scripted_recurrence(U: Tensor, x: Optional[Tensor], weight_c: Tensor, bias: Tensor,
                        c0: Optional[Tensor], mask_c: Optional[Tensor],
                        mask_pad: Optional[Tensor], hidden: int, dirs: int,
                        has_skip_term: bool, scale: Tensor,
                        use_tanh: bool) -> Tuple[Tensor, Tensor]:
    """``elementwise_recurrence_reference`` in TorchScript: U (L, B, dirs*d*k), x (L, B, dirs*d)
    (read only when k == 3), weight_c and bias (2*dirs*d,), c0 / mask_c (B, dirs*d), mask_pad
    (L, B) nonzero = padded. Returns h (L, B, dirs*d) and the last c (B, dirs*d)."""
    length, batch = U.size(0), U.size(1)
    k = U.size(2) // (dirs * hidden)
    u = U.reshape(length, batch, dirs, hidden, k)
    w = weight_c.reshape(2, dirs, hidden)
    b = bias.reshape(2, dirs, hidden)
    c_init = U.new_zeros(batch, dirs, hidden) if c0 is None else c0.reshape(batch, dirs, hidden)
    x_skip: Optional[Tensor] = None
    if has_skip_term:
        if k == 3:
            assert x is not None
            x_skip = x.reshape(length, batch, dirs, hidden) * scale
        else:
            x_skip = u[:, :, :, :, 3]
    keep: Optional[Tensor] = None
    if mask_pad is not None:
        keep = (mask_pad.reshape(length, batch, 1) == 0).to(U.dtype)
    drop: Optional[Tensor] = None
    if mask_c is not None:
        drop = mask_c.reshape(batch, dirs, hidden)
    h_dirs: List[Tensor] = []
    c_dirs: List[Tensor] = []
    for di in range(dirs):
        v_f, v_r, b_f, b_r = w[0, di], w[1, di], b[0, di], b[1, di]
        c_prev = c_init[:, di]
        steps: List[Tensor] = []
        for step in range(length):
            t = step if di == 0 else length - 1 - step
            u_t = u[t, :, di]
            f = torch.sigmoid(u_t[:, :, 1] + v_f * c_prev + b_f)
            r = torch.sigmoid(u_t[:, :, 2] + v_r * c_prev + b_r)
            c = f * c_prev + (1 - f) * u_t[:, :, 0]
            if keep is not None:  # a padded step keeps the state and outputs 0
                c = keep[t] * c + (1 - keep[t]) * c_prev
            g = torch.tanh(c) if use_tanh else c
            gated = r if drop is None else r * drop[:, di]
            if x_skip is None:
                h_t = gated * g
            else:
                x_t = x_skip[t, :, di]
                h_t = x_t + gated * (g - x_t)
            if keep is not None:
                h_t = h_t * keep[t]
            steps.append(h_t)
            c_prev = c
        if di == 1:
            steps.reverse()
        h_dirs.append(torch.stack(steps, 0))
        c_dirs.append(c_prev)
    h = torch.stack(h_dirs, 2).reshape(length, batch, dirs * hidden)
    return h, torch.stack(c_dirs, 1).reshape(batch, dirs * hidden)


def _state_dtype(t: Tensor) -> torch.dtype:
    """float32 for half-precision inputs (c accumulates over time), else the input's dtype."""
    return recurrence_dtype(t.dtype, False)


def stack_states(c_last: List[Tensor], compatible: bool, layers: int, batch: int, dirs: int,
                 hidden: int) -> Tensor:
    """``StackBase._stack_c``: (layers, B, dirs*d), or (layers*dirs, B, d) when compatible."""
    c_stack = torch.stack(c_last)
    if compatible:
        c_stack = (c_stack.view(layers, batch, dirs, hidden).transpose(1, 2)
                   .reshape(-1, batch, hidden))
    return c_stack


def _dropout_mask(like: Tensor, rows: int, cols: int, p: float) -> Tensor:
    """The eager modules' per-sequence mask (sru/cell_base.py ``_dropout_mask``)."""
    return like.new_empty(rows, cols).bernoulli_(1 - p).div_(1 - p)


def _dtype_name(dtype: torch.dtype) -> str:
    """A dtype's name in TorchScript, where str(dtype) is its enum number."""
    for known, name in ((torch.float32, "torch.float32"), (torch.float64, "torch.float64"),
                        (torch.float16, "torch.float16"), (torch.bfloat16, "torch.bfloat16")):
        if dtype == known:
            return name
    return "a non-float dtype"


def check_scripted_input(owner: str, input: Tensor, width: int, weight: Tensor, layout: str) -> None:
    """The eager checks' rank, width, dtype (``weight``'s) and device, in TorchScript (which has
    no f-strings)."""
    if input.dim() != 3 or input.size(-1) != width:
        raise ValueError(owner + " expected input of shape " + layout + ", got " + str(input.shape))
    if input.dtype != weight.dtype:
        raise ValueError(owner + " expected input of the parameters' dtype " + _dtype_name(weight.dtype)
                         + ", got " + _dtype_name(input.dtype) + "; convert the input or the module")
    if input.device != weight.device:
        raise ValueError(owner + " expected input on the parameters' device " + str(weight.device)
                         + ", got " + str(input.device) + "; move the input or the module")


class ScriptableCell:
    """``SRUCell``'s TorchScript forward (a mixin: ``SRUCell`` inherits it)."""

    def __prepare_scriptable__(self):
        """``torch.jit.script`` calls this on every submodule before compiling: a custom_m is
        refused here, at scripting, rather than at the scripted module's first call."""
        if getattr(self, "custom_m", None) is not None:
            raise ValueError(f"{type(self).__name__} with custom_m cannot be scripted (torch.jit.script): "
                             "custom_m's signature is free-form; export the model with sru.deploy.export "
                             "instead (docs/deploy.md)")
        return self

    def _scripted_forward(self, input: Tensor, c0: Optional[Tensor],
                          mask_pad: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        weight, proj = self.weight, self.weight_proj
        if weight is None:
            raise RuntimeError("SRUCell with custom_m cannot run under torch.jit.script; "
                               "use torch.export (docs/deploy.md)")
        single_step = input.dim() == 2
        if single_step:
            input = input.unsqueeze(0)
            if mask_pad is not None and mask_pad.dim() == 1:
                mask_pad = mask_pad.unsqueeze(0)
        check_scripted_input("SRUCell", input, self.input_size, weight, "(length, batch, " + str(self.input_size) + ") or (batch, "
                             + str(self.input_size) + ")")
        length, batch = input.size(0), input.size(1)
        if c0 is not None and (c0.dim() != 2 or c0.size(0) != batch
                               or c0.size(1) != self.output_size):
            raise ValueError("SRUCell expected c0 of shape (batch, directions*hidden_size)")
        if mask_pad is not None and (mask_pad.dim() != 2 or mask_pad.size(0) != length
                                     or mask_pad.size(1) != batch):
            raise ValueError("SRUCell expected mask_pad of shape (length, batch)")
        if length == 0 or batch == 0:
            h = input.new_zeros(length, batch, self.output_size)
            c = (input.new_zeros(batch, self.output_size, dtype=_state_dtype(input))
                 if c0 is None else c0.to(_state_dtype(input)))
            return (h.squeeze(0) if single_step else h), c
        residual = input
        norm = self.layer_norm
        if norm is not None and not self.normalize_after:
            input = norm(input)
        input, mask_c = self._scripted_dropout(input, batch)
        rows = input.reshape(-1, input.size(-1))
        if proj is not None:
            rows = rows.mm(proj)
        U = rows.mm(weight).view(length, batch, -1)
        h, c = self._scripted_recurrence(U, residual, c0, mask_c, mask_pad)
        return (h.squeeze(0) if single_step else h), c

    def _scripted_dropout(self, input: Tensor, batch: int) -> Tuple[Tensor, Optional[Tensor]]:
        """``RecurrentCellBase._dropout``: per-sequence masks in training mode."""
        mask_c: Optional[Tensor] = None
        if self.training and self.rnn_dropout > 0:
            input = input * _dropout_mask(input, batch, input.size(-1), self.rnn_dropout)
        if self.training and self.dropout > 0:
            mask_c = _dropout_mask(input, batch, self.output_size, self.dropout)
        return input, mask_c

    def _scripted_recurrence(self, U: Tensor, residual: Tensor, c0: Optional[Tensor],
                             mask_c: Optional[Tensor],
                             mask_pad: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        """The recurrence in the state dtype, then the layer norm after it if any; h comes
        back in the input's dtype (the eager rule, sru/cell_base.py ``_recurrence``)."""
        dtype = _state_dtype(U)
        scale = self.scale_x if self.rescale else torch.ones_like(self.scale_x)
        h, c = scripted_recurrence(
            U.to(dtype), residual.to(dtype), self.weight_c.to(dtype), self.bias.to(dtype),
            None if c0 is None else c0.to(dtype), None if mask_c is None else mask_c.to(dtype),
            mask_pad, self.hidden_size, self.num_directions, self.has_skip_term,
            scale.to(dtype), self.activation_type == 1)
        norm = self.layer_norm
        if norm is not None and self.normalize_after:
            h = norm(h)
        return h.to(residual.dtype), c


class ScriptableStack:
    """``SRU``'s TorchScript forward (a mixin: ``SRU`` inherits it); each cell runs its own
    ``_scripted_forward``."""

    def _scripted_forward(self, input: Tensor, c0: Optional[Tensor],
                          mask_pad: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        if input.dim() != 3 or input.size(-1) != self.input_size:
            raise ValueError("SRU expected input of shape (" + ("batch, length, " if self.batch_first
                             else "length, batch, ") + str(self.input_size) + "), got " + str(input.shape))
        if self.batch_first:
            input = input.transpose(0, 1)
            if mask_pad is not None:
                mask_pad = mask_pad.transpose(0, 1)
        batch = input.size(1)
        if c0 is not None and (c0.dim() != 3 or c0.size(0) != self.num_layers
                               or c0.size(1) != batch or c0.size(2) != self.output_size):
            raise ValueError("SRU expected c0 of shape (num_layers, batch, "
                             "directions*hidden_size)")
        h = input
        to_hidden = self.input_to_hidden
        if to_hidden is not None:
            h = to_hidden(h)
        c_last: List[Tensor] = []
        for i, cell in enumerate(self.rnn_lst):
            h, c = cell(h, None if c0 is None else c0[i], mask_pad)
            c_last.append(c)
        c_stack = stack_states(c_last, self.nn_rnn_compatible_return, self.num_layers, batch,
                               self.num_directions, self.hidden_size)
        return (h.transpose(0, 1) if self.batch_first else h), c_stack
