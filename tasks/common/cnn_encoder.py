"""Kim (2014) CNN sentence encoder, the paper's convolutional baseline: for each width (3, 4, 5) 100
filters, ReLU; the classifier then takes the max over time (pooling="max").

Listed as encoder "cnn" in ``tasks/common/encoders.py``'s table, so ``model=cnn`` plugs into
``build_encoder`` like sru/lstm for any task. Windows end at t, so the features are causal.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class CNNEncoder(nn.Module):
    """forward(x (L, B, D), state=None, mask_pad=None) -> (features (L, B, len(widths)*filters), None).

    Position t holds the window of ``w`` tokens ending at t (left zero-padded, so every real token ends
    one window and short sentences still get features); padded positions are zeroed in the input so they
    contribute like Kim's zero padding. Pooling over real positions is the classifier's job.
    """

    preferred_pooling = "max"
    bidirectional = False
    num_layers = 1

    def __init__(self, input_size: int, widths: Sequence[int] = (3, 4, 5), filters: int = 100,
                 activation: str = "relu"):
        super().__init__()
        widths = list(widths)
        if not widths or any(int(w) < 1 for w in widths) or int(filters) < 1:
            raise ValueError(f"model=cnn: expected widths >= 1 and filters >= 1, received widths={widths}, "
                             f"filters={filters}")
        if activation not in ("relu", "tanh"):
            raise ValueError(f"model.activation: expected 'relu' or 'tanh', received {activation!r}")
        self.input_size = input_size
        self.widths = [int(w) for w in widths]
        self.output_size = len(widths) * int(filters)
        self.activation = activation
        self.convs = nn.ModuleList(nn.Conv1d(input_size, int(filters), w) for w in self.widths)

    def forward(self, x: Tensor, state=None, mask_pad: Optional[Tensor] = None, return_all_layers: bool = False):
        if x.dim() != 3 or x.size(-1) != self.input_size:
            raise ValueError(f"CNN encoder: expected input of shape (L, B, {self.input_size}), "
                             f"received {tuple(x.shape)}")
        if mask_pad is not None:
            x = x.masked_fill(mask_pad.unsqueeze(-1), 0.0)
        h = x.permute(1, 2, 0)  # (B, D, L) for conv1d
        act = F.relu if self.activation == "relu" else torch.tanh
        feats = [act(conv(F.pad(h, (w - 1, 0)))) for w, conv in zip(self.widths, self.convs)]
        out = torch.cat(feats, dim=1).permute(2, 0, 1)  # (L, B, out)
        return ([out] if return_all_layers else out), None

    def step(self, x_t: Tensor, state=None):
        raise ValueError("model=cnn has no recurrent state to carry: it cannot decode one step at a time; "
                         "use model=sru or model=lstm")

    def reorder_state(self, state, index):
        return None
