"""CTC acoustic model: stacked (bi)directional recurrent encoder (model=sru / model=lstm) over stacked
log-mel frames, then a linear layer to characters (+ blank) per frame."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from torch import Tensor, nn

from tasks.common.encoders import build_encoder


class CTCModel(nn.Module):
    def __init__(self, input_size: int, num_labels: int, model_cfg: Mapping[str, Any], dropout: float = 0.1):
        super().__init__()
        self.encoder = build_encoder(model_cfg, input_size)
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(self.encoder.output_size, num_labels)

    def forward(self, x: Tensor, mask_pad: Optional[Tensor] = None) -> Tensor:
        """x (L, B, input_size), mask_pad (L, B) true on padding -> per-frame logits (L, B, num_labels)."""
        h, _ = self.encoder(x, mask_pad=mask_pad)
        return self.output(self.dropout(h))
