"""What ``torch.jit.script`` compiles of ``SRUpp``, ``SRUppCell`` and their attention transforms
(docs/deploy.md#torchscript), as sru/scripting/cells.py does for ``SRU`` (the attention block's part:
sru/scripting/attention.py): each ``forward`` starts with
``if torch.jit.is_scripting(): return self._scripted_forward(...)`` and TorchScript compiles only
these methods; the eager code, its checks and messages, stay as they are. The maths are the
eager modules' (sru/srupp.py), with the recurrence of sru/scripting/cells.py. Not scriptable:
PackedSequence input.
"""
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

from sru.scripting.cells import check_scripted_input, stack_states


class ScriptableSRUppCell:
    """``SRUppCell``'s TorchScript forward (a mixin; the recurrence is ScriptableCell's)."""

    def _scripted_forward(self, input: Tensor, c0: Optional[Tensor], mask_pad: Optional[Tensor],
                          attn_mask: Optional[Tensor], memory: Optional[Tensor],
                          memory_mask_pad: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
        check_scripted_input("SRUppCell", input, self.input_size, self.weight_c,
                             "(length, batch, " + str(self.input_size) + ")")
        residual = input
        norm = self.layer_norm
        if norm is not None and not self.normalize_after:
            input = norm(input)
        input, mask_c = self._scripted_dropout(input, input.size(1))
        transform = self.transform_module
        # hasattr on a submodule is a static test to TorchScript: only SRUppAttention has
        # linear3 and takes the attention arguments (SRUppProjectedLinear ignores them; the
        # official plain layout, nn.Linear or nn.Sequential, takes the input alone).
        if hasattr(transform, "linear3"):
            U = transform(input, mask_pad=mask_pad, attn_mask=attn_mask, memory=memory,
                          memory_mask_pad=memory_mask_pad)
        else:
            U = transform(input)
        return self._scripted_recurrence(U, residual, c0, mask_c, mask_pad)


class ScriptableSRUppStack:
    """``SRUpp``'s TorchScript forward (a mixin)."""

    def _scripted_forward(self, input: Tensor, c0: Optional[Tensor], mask_pad: Optional[Tensor],
                          attn_mask: Optional[Tensor], memory: Optional[List[Optional[Tensor]]],
                          memory_mask_pad: Optional[Tensor]
                          ) -> Tuple[Tensor, Tensor, Dict[str, List[Tensor]]]:
        if input.dim() != 3 or input.size(-1) != self.input_size:
            raise ValueError("SRUpp expected input of shape (length, batch, " + str(self.input_size)
                             + "), got " + str(input.shape))
        batch = input.size(1)
        x = input
        to_hidden = self.input_to_hidden
        if to_hidden is not None:
            x = to_hidden(input)
        x = x.contiguous()
        saved_inputs: List[Tensor] = []
        c_last: List[Tensor] = []
        for i, cell in enumerate(self.rnn_lst):
            saved_inputs.append(x)
            layer_memory: Optional[Tensor] = None
            if memory is not None:
                layer_memory = memory[i]
            x, c = cell(x, None if c0 is None else c0[i], mask_pad, attn_mask, layer_memory,
                        memory_mask_pad)
            c_last.append(c)
        c_stack = stack_states(c_last, self.nn_rnn_compatible_return, self.num_layers, batch,
                               self.num_directions, self.hidden_size)
        return x, c_stack, {"saved_inputs": saved_inputs}
