"""The speech model's optional convolutional front-end (task.frontend): same length, padding-independent
outputs, the same for model=sru and model=lstm, and off by default."""
from __future__ import annotations

import pytest
import torch
from conftest import model_config

from tasks.common.batching import pad_collate
from tasks.speech.model import ConvFrontEnd, CTCModel
from tasks.speech.schema import FrontEndConfig

MODELS = {name: model_config(name, hidden_size=8, num_layers=2, bidirectional=True) for name in ("sru", "lstm")}


def test_frontend_keeps_length_and_ignores_padding():
    torch.manual_seed(0)
    fe = ConvFrontEnd(6, channels=5, layers=2, kernel_size=5)
    xs = [torch.randn(n, 6) for n in (9, 4, 1)]
    x, mask_pad, _ = pad_collate(xs, 0.0)
    x = x.masked_fill(mask_pad.unsqueeze(-1), 7.0)  # garbage in the padding must not leak into real frames
    out = fe(x, mask_pad)
    assert out.shape == (9, 3, 5)
    for b, xb in enumerate(xs):  # each utterance alone, no padding: the same real frames
        alone = fe(xb.unsqueeze(1))
        assert torch.allclose(out[: len(xb), b], alone[:, 0], atol=1e-6)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_ctc_model_with_frontend_for_each_encoder(model):
    torch.manual_seed(0)
    m = CTCModel(12, 7, MODELS[model], dropout=0.0, frontend=FrontEndConfig(layers=2, channels=10, kernel_size=3)).eval()
    assert m.frontend is not None and m.encoder.input_size == 10
    xs = [torch.randn(n, 12) for n in (6, 3)]
    x, mask_pad, _ = pad_collate(xs, 0.0)
    logits = m(x, mask_pad)
    assert logits.shape == (6, 2, 7)
    assert torch.allclose(logits[:3, 1], m(xs[1].unsqueeze(1))[:, 0], atol=1e-5)  # padding changes nothing
    logits.sum().backward()
    assert m.frontend.convs[0].weight.grad is not None


def test_frontend_off_by_default_and_even_kernel_refused():
    m = CTCModel(12, 7, MODELS["sru"], frontend=FrontEndConfig(layers=0, channels=10, kernel_size=5))
    assert m.frontend is None and m.encoder.input_size == 12
    assert CTCModel(12, 7, MODELS["lstm"]).frontend is None
    with pytest.raises(ValueError, match="odd"):
        ConvFrontEnd(12, channels=4, layers=1, kernel_size=4)
