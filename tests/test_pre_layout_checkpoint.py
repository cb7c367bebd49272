"""Checkpoints saved before the layer's internals v2 (issue 43) still load and compute the same:
whole pickled SRU / SRUpp modules (their cells kept ``backend`` in ``__dict__``, now a property)
and state_dicts. The fixture was written by the code of commit 0f723df."""
from pathlib import Path

import pytest
import torch

import sru

FIXTURE = Path(__file__).parent / "fixtures" / "pre_layout" / "sru_and_srupp.pt"


@pytest.fixture(scope="module")
def saved():
    return torch.load(FIXTURE, weights_only=False)


def test_whole_pickled_modules_load_and_compute_the_same(saved):
    rnn, pp, x = saved["sru_module"], saved["srupp_module"], saved["x"]
    assert rnn.backend == "auto" and pp.backend == "auto"
    with torch.no_grad():
        torch.testing.assert_close(rnn(x), saved["sru_out"])
        torch.testing.assert_close(pp(x)[:2], saved["srupp_out"])
    rnn.backend = "reference"  # the property works on an unpickled cell
    with torch.no_grad():
        torch.testing.assert_close(rnn(x), saved["sru_out"])
    with pytest.raises(ValueError, match="expected backend in"):
        rnn.rnn_lst[0].backend = "gpu"


def test_state_dicts_load_strictly_into_new_modules(saved):
    rnn = sru.SRU(6, 4, num_layers=2, bidirectional=True, rescale=True, layer_norm=True,
                  highway_bias=-1.0).double().eval()
    pp = sru.SRUpp(6, 8, 4, num_layers=2, num_heads=2).double().eval()
    rnn.load_state_dict(saved["sru_state"], strict=True)
    pp.load_state_dict(saved["srupp_state"], strict=True)
    with torch.no_grad():
        torch.testing.assert_close(rnn(saved["x"]), saved["sru_out"])
        torch.testing.assert_close(pp(saved["x"])[:2], saved["srupp_out"])
