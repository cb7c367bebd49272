"""bf16 training on CPU (issue 69 item 3): the SRU's gradients under ``trainer.precision=bf16``'s autocast are
fp32's within bf16's tolerance, the recurrence stays fp32, and a CPU without native bf16 (where the step is
emulated, slower than fp32: ``python -m bench.precision.training`` with oneDNN capped to AVX2) is named in one
warning line at the start of training."""
import pytest
import torch

import sru
import sru.ops.precision as precision
from conftest import tiny_lm_overrides
from sru import Precision
from sru.testing import TOLERANCE, rel_err


@pytest.mark.parametrize("layer_norm", [False, True])
def test_bf16_autocast_gradients_match_fp32_within_bf16_tolerance(layer_norm):
    torch.manual_seed(0)
    model = sru.SRU(64, 64, num_layers=2, layer_norm=layer_norm)
    x, upstream = torch.randn(16, 4, 64), torch.randn(16, 4, 64)
    grads = {}
    for p in (Precision.FP32, Precision.BF16):
        model.zero_grad(set_to_none=True)
        inp = x.clone().requires_grad_()
        with p.autocast("cpu"):
            h, c = model(inp)
        assert h.dtype is torch.float32 and c.dtype is torch.float32  # the recurrence runs in fp32
        h.backward(upstream)
        grads[p] = [inp.grad] + [param.grad for param in model.parameters()]
    tolerance = 2 * TOLERANCE[torch.bfloat16]  # two layers of bf16 products, forward and backward
    for got, want in zip(grads[Precision.BF16], grads[Precision.FP32]):
        assert got.dtype is torch.float32 and rel_err(got, want) < tolerance


def test_bf16_is_named_slower_only_where_the_cpu_has_no_native_bf16(monkeypatch):
    assert Precision.FP32.slower_than_fp32("cpu") is None and Precision.BF16.slower_than_fp32("cuda") is None
    assert (Precision.BF16.slower_than_fp32("cpu") is None) == precision.bf16_native()
    monkeypatch.setattr(precision, "bf16_flags", lambda: ("avx512_bf16",))  # EPYC Zen 4: no AMX, bf16 pays
    assert Precision.BF16.slower_than_fp32("cpu") is None
    monkeypatch.setattr(precision, "bf16_flags", lambda: ())
    assert "neither avx512_bf16 nor amx_bf16" in Precision.BF16.slower_than_fp32("cpu")


@pytest.mark.slow
def test_bf16_training_without_native_bf16_warns_in_one_line(run_train, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(precision, "bf16_flags", lambda: ())
    run_train(tiny_lm_overrides(steps=2) + ["trainer.precision=bf16"], tmp_path / "run")
    lines = [line for line in capsys.readouterr().out.splitlines() if "warning" in line and "bf16" in line]
    assert len(lines) == 1
    assert lines[0].startswith("[trainer] warning: trainer.precision=bf16 trains slower than fp32 here: this CPU")
    assert lines[0].endswith("use trainer.precision=fp32")
