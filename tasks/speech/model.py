"""CTC acoustic model: an optional convolutional front-end over stacked log-mel frames, a stacked
(bi)directional recurrent encoder (model=sru / model=lstm), then a linear layer to characters (+ blank)
per frame."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from torch import Tensor, nn

from tasks.common.encoders import build_encoder
from tasks.speech.schema import FrontEndConfig


class ConvFrontEnd(nn.Module):
    """``layers`` 1-D convolutions over time (kernel ``kernel_size``, stride 1, "same" padding), each
    followed by ReLU: (L, B, input_size) -> (L, B, channels).

    Why: an SRU layer's matrices see one frame x_t at a time (only the elementwise recurrence mixes
    time), so a few convolutions give every encoder input the shape of the spectrum around it, as the
    convolutional front-ends of CTC speech models do. Stride 1 keeps the encoder's length, so lengths,
    ``mask_pad`` and the CTC frame count are unchanged. Padded steps are zeroed before every convolution:
    a frame's output does not depend on how much padding its batch has."""

    def __init__(self, input_size: int, channels: int, layers: int, kernel_size: int):
        super().__init__()
        if kernel_size % 2 == 0:
            raise ValueError(f"task.frontend.kernel_size must be odd (same-length output), received {kernel_size}")
        self.convs = nn.ModuleList(nn.Conv1d(input_size if i == 0 else channels, channels, kernel_size,
                                             padding=kernel_size // 2) for i in range(layers))
        self.output_size = channels if layers else input_size

    def forward(self, x: Tensor, mask_pad: Optional[Tensor] = None) -> Tensor:
        h = x.permute(1, 2, 0)  # (B, D, L): Conv1d's layout
        keep = None if mask_pad is None else (~mask_pad).t().unsqueeze(1).to(x.dtype)  # (B, 1, L)
        for conv in self.convs:
            if keep is not None:
                h = h * keep
            h = conv(h).relu()
        return h.permute(2, 0, 1)


class CTCModel(nn.Module):
    def __init__(self, input_size: int, num_labels: int, model_cfg: Mapping[str, Any], dropout: float = 0.1,
                 frontend: Optional[FrontEndConfig] = None):
        super().__init__()
        layers = frontend.layers if frontend else 0  # task.frontend (conf/task/speech.yaml); None: no front-end
        # the same front-end whatever the encoder (model=sru | lstm): the encoder reads its channels
        self.frontend = ConvFrontEnd(input_size, int(frontend.channels), layers,
                                     int(frontend.kernel_size)) if layers else None
        self.encoder = build_encoder(model_cfg, self.frontend.output_size if self.frontend else input_size)
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(self.encoder.output_size, num_labels)

    def forward(self, x: Tensor, mask_pad: Optional[Tensor] = None) -> Tensor:
        """x (L, B, input_size), mask_pad (L, B) true on padding -> per-frame logits (L, B, num_labels)."""
        if self.frontend is not None:
            x = self.frontend(x, mask_pad)
        h, _ = self.encoder(x, mask_pad=mask_pad)
        return self.output(self.dropout(h))
