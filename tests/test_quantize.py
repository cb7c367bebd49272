"""int8 (``sru.quantize_dynamic``) and bf16 (autocast) SRU / SRU++ inference (issue 54): outputs
within stated tolerances of fp32 for every option, the int8 kernel really runs, state_dict round
trip, copies, and the one-line refusals."""
import copy
import io
from collections import OrderedDict

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence

import sru
from sru.linear import DispatchedLinear
from sru.quantize import bf16_native, check_int8_device, int8_engine, quantize_weight
from sru.testing import rel_err

pytestmark = [pytest.mark.skipif(int8_engine() is None, reason="no x86/fbgemm/onednn quantised engine"),
              pytest.mark.usefixtures("int8_kernels_on_tiny_products")]

INT8_TOL, BF16_TOL = 0.05, 0.05  # relative error of h against fp32 (docs/inference.md#precision)
OPTIONS = {"plain": {}, "bidirectional": {"bidirectional": True}, "projection": {"projection_size": 24},
           "layer_norm": {"layer_norm": True}, "k4_skip": {"project_skip": True}}


def model_and_input(option, seed=0):
    torch.manual_seed(seed)
    hidden = 16 if option == "bidirectional" else 32
    model = sru.SRU(32, hidden, num_layers=2, **OPTIONS[option]).eval()
    return model, torch.randn(12, 4, 32)


def int8_ran(fn) -> bool:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return any("linear_dynamic" in e.name or "qlinear_pointwise" in e.name for e in prof.events())


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("option", list(OPTIONS))
def test_int8_and_bf16_close_to_fp32(option, packed):
    model, x = model_and_input(option)
    lengths = torch.tensor([12, 7, 3, 1])
    run = (lambda m: m(pack_padded_sequence(x, lengths, enforce_sorted=False))[0].data) if packed \
        else (lambda m: m(x)[0])
    quantized = sru.quantize_dynamic(model)
    with torch.no_grad():
        want = run(model)
        assert rel_err(run(quantized), want) < INT8_TOL
        assert int8_ran(lambda: run(quantized))
        with torch.autocast("cpu", torch.bfloat16):
            got = run(model)
        assert got.dtype == torch.float32 or got.dtype == torch.bfloat16
        assert rel_err(got.float(), want) < BF16_TOL
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the original is untouched


def test_bf16_projections_fp32_recurrence():
    model, x = model_and_input("layer_norm")
    with torch.no_grad():
        want, U32 = model(x)[0], model.rnn_lst[0].compute_U(x)
        with torch.autocast("cpu", torch.bfloat16):
            U = model.rnn_lst[0].compute_U(x)
            h, c = model(x)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                model(x)
    assert 1e-4 < rel_err(U.float(), U32) < BF16_TOL  # U from a bf16 GEMM (returned as float32 in inference)
    assert c.dtype == torch.float32 and h.dtype == torch.float32
    # inference: the projections as oneDNN bf16 GEMMs on prepacked bf16 weights, not re-cast per call
    assert any("_linear_pointwise" in e.name for e in prof.events())
    assert 1e-4 < rel_err(h, want) < BF16_TOL  # really bf16, and close


@pytest.mark.slow  # a subprocess
def test_bf16_runs_where_onednn_cannot_pack_bf16_weights():
    """An AVX2-only CPU (oneDNN capped with ONEDNN_MAX_CPU_ISA=AVX2, as docs/benchmarks.md measures one) cannot
    prepack bf16 weights: bf16 autocast then takes torch's own path instead of failing, still close to fp32."""
    import subprocess
    import sys
    code = """
import torch, sru
from sru.ops.cpu import gemm
from sru.testing import rel_err
torch.manual_seed(0)
m, x = sru.SRU(32, 32, num_layers=2).eval(), torch.randn(12, 4, 32)
with torch.no_grad():
    want = m(x)[0]
    with torch.autocast("cpu", torch.bfloat16):
        got = m(x)[0]
print(gemm.onednn_packs_bf16(), float(rel_err(got.float(), want)))
"""
    env = {**__import__("os").environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    packs, err = done.stdout.split()
    assert packs == "False" and 1e-4 < float(err) < BF16_TOL


@pytest.mark.parametrize("attention", [True, False])
def test_srupp_int8(attention):
    torch.manual_seed(0)
    model = sru.SRUpp(32, 32, 16, num_layers=2, attention_every_n_layers=1 if attention else 3).eval()
    x = torch.randn(10, 3, 32)
    quantized = sru.quantize_dynamic(model)
    assert quantized.rnn_lst[0].transform_module.linear1.precision == "int8"
    with torch.no_grad():
        assert rel_err(quantized(x)[0], model(x)[0]) < INT8_TOL
        cache, steps = None, []
        for t in range(3):  # the decode step
            h, cache = quantized.decode(x[t], cache)
            steps.append(h)
        # a step and the full sequence differ by int8 rounding (the attention's rows differ between them)
        assert rel_err(torch.stack(steps), model(x[:3])[0]) < INT8_TOL
        assert int8_ran(lambda: quantized.decode(x[3], cache))


def test_state_dict_round_trip_and_copies():
    model, x = model_and_input("projection")
    quantized = sru.quantize_dynamic(model)
    buffer = io.BytesIO()
    torch.save(quantized.state_dict(), buffer)
    buffer.seek(0)
    other = sru.quantize_dynamic(model_and_input("projection", seed=5)[0])
    other.load_state_dict(torch.load(buffer))
    with torch.no_grad():
        want = quantized(x)[0]
        assert torch.equal(other(x)[0], want)
        copied = copy.deepcopy(quantized)
        assert torch.equal(copied(x)[0], want) and int8_ran(lambda: copied(x))


def test_keep_fp32_leaves_named_layers():
    net = torch.nn.Sequential(sru.SRU(8, 8, num_layers=1), torch.nn.Linear(8, 3))
    quantized = sru.quantize_dynamic(net, keep_fp32=["1"])
    assert type(quantized[1]) is torch.nn.Linear and quantized[0].rnn_lst[0].precision == "int8"
    named = torch.nn.Sequential(OrderedDict(rnn=sru.SRU(8, 8, num_layers=1), decoder=torch.nn.Linear(8, 3)))
    one_name = sru.quantize_dynamic(named, keep_fp32="decoder")  # one name, not its characters
    assert type(one_name.decoder) is torch.nn.Linear and one_name.rnn.rnn_lst[0].precision == "int8"
    kept_layer = sru.quantize_dynamic(named, keep_fp32="rnn")
    assert kept_layer.rnn.rnn_lst[0].precision == "fp32" and type(kept_layer.decoder) is DispatchedLinear
    assert kept_layer.decoder.precision == "int8"


def test_int8_refusals_name_what_works():
    with pytest.raises(ValueError, match="precision=int8 runs on CPU only.*precision=fp32 / bf16"):
        check_int8_device("cuda")
    check_int8_device("cpu")


def test_bf16_emulation_warns_once(monkeypatch):
    import sru.quantize as q
    monkeypatch.setattr(q, "_warned", set())
    monkeypatch.setattr(sru.ops.precision, "bf16_flags", lambda: ())  # a CPU without avx512_bf16 / amx_bf16
    with pytest.warns(UserWarning, match="neither avx512_bf16 nor amx_bf16 in its flags, so bf16 products are "
                                         "emulated"):
        q.warn_if_bf16_emulated()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q.warn_if_bf16_emulated()  # once only
    assert isinstance(bf16_native(), bool)


@pytest.mark.slow
def test_torch_export_of_a_quantized_model_runs_the_dequantized_weights():
    model, x = model_and_input("plain")
    quantized = sru.quantize_dynamic(model)

    class Outputs(torch.nn.Module):
        def __init__(self, rnn):
            super().__init__()
            self.rnn = rnn

        def forward(self, x):
            return self.rnn(x)[0]
    exported = torch.export.export(Outputs(quantized), (x,))
    with torch.no_grad():
        got = exported.module()(x)
        # the int8-rounded weights in fp32: close to both the int8 run and fp32
        assert rel_err(got, quantized(x)[0]) < INT8_TOL and rel_err(got, model(x)[0]) < INT8_TOL


def test_every_int8_engine_computes_the_same_layer(monkeypatch):
    """qlinear (oneDNN's u8 x s8 GEMM behind our row quantiser) and torch's oneDNN, x86 and fbgemm dynamic
    linears agree on one quantised layer; SRU_INT8_ENGINE picks the engine that packs the weight (checked on
    the packs), and torch's global engine is left alone."""
    from sru.ops.cpu import int8
    model, x = model_and_input("plain")
    q = sru.quantize_dynamic(model)
    engines = int8.usable_engines()
    before = torch.backends.quantized.engine
    outs = {}
    for engine in engines:
        monkeypatch.setenv(int8.INT8_ENGINE_VAR, engine)
        assert int8.int8_engine() == engine
        with torch.no_grad():
            assert int8_ran(lambda: q(x))
            outs[engine] = q(x)[0]
        cell = next(m for m in q.modules() if isinstance(m, sru.SRUCell))
        assert engine in int8._packs[cell.weight_int8.q]
    assert torch.backends.quantized.engine == before
    for engine, out in outs.items():
        assert rel_err(out, outs[engines[0]]) < 0.02, engine
    monkeypatch.setenv(int8.INT8_ENGINE_VAR, "qnnpack")
    with pytest.raises(ValueError, match="SRU_INT8_ENGINE=qnnpack: .*unset it"):
        int8.int8_engine()


def test_int8_engine_by_cpu(monkeypatch):
    """qlinear on every x86 CPU; without VNNI its activations take 7 bits (u8 x s8 pair sums then saturate at
    16 bits on 8), and a layer still computes close to fp32 with them."""
    from sru.ops.cpu import int8
    monkeypatch.delenv(int8.INT8_ENGINE_VAR, raising=False)
    if not int8.qlinear_available():
        pytest.skip("no oneDNN qlinear in this torch")
    monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: True)
    assert int8.int8_engine() == int8.QLINEAR and int8.activation_levels() == 127
    model, x = model_and_input("plain")
    quantized = sru.quantize_dynamic(model)
    with torch.no_grad():
        want, full = model(x)[0], quantized(x)[0]
        monkeypatch.setattr(torch.cpu, "_is_vnni_supported", lambda: False)
        assert int8.int8_engine() == int8.QLINEAR and int8.activation_levels() == 63
        seven_bits = quantized(x)[0]
    assert rel_err(seven_bits, want) < INT8_TOL and rel_err(full, want) < rel_err(seven_bits, want)


def test_row_quantiser_matches_its_torch_twin(monkeypatch):
    """The fused C row quantiser and the torch-op one used without the compiled library give the same bytes
    (up to a rounding tie: one step) and the same row scales; each row is scaled by its own max |x|."""
    from sru.ops.cpu import int8
    if int8._library() is None or not int8.qlinear_available():
        pytest.skip("the fused CPU kernel is not built here, or this torch has no oneDNN qlinear")
    x = torch.randn(37, 300) * torch.logspace(-3, 3, 37)[:, None]
    x[5] = 0.0
    for levels in (127, 63):
        got, got_max = torch.empty(37, 300, dtype=torch.uint8), torch.empty(37)
        int8.quantize_rows(x, got, got_max, levels)
        with monkeypatch.context() as m:
            m.setattr(int8, "_library", lambda: None)
            want, want_max = torch.empty(37, 300, dtype=torch.uint8), torch.empty(37)
            int8.quantize_rows(x, want, want_max, levels)
        assert torch.equal(got_max, want_max)
        assert (got.int() - want.int()).abs().max() <= 1
        assert int(got.max()) == 2 * levels + 1 and int(got.min()) == 1 and torch.all(got[5] == levels + 1)
        steps = got.float() - (levels + 1)
        assert ((steps * got_max[:, None] / levels - x).abs() <= got_max[:, None] / levels / 2 * 1.001).all()  # half a step
        out, bias = torch.randn(37, 11), torch.randn(11)
        scaled = out * got_max[:, None]
        err = (int8.scale_rows(out.clone(), got_max, bias) - (scaled + bias)).abs()
        assert (err <= 1e-6 * (scaled.abs() + bias.abs())).all()  # one rounding apart (a fused multiply-add)
    monkeypatch.setenv(int8.INT8_ENGINE_VAR, int8.QLINEAR)
    q, scale, b = _int8_weight(24, 300, seed=4)
    with torch.no_grad():
        fused = int8.per_token_product(x, q, scale, b)
        monkeypatch.setattr(int8, "_library", lambda: None)
        assert rel_err(int8.per_token_product(x, q, scale, b), fused) < 1e-3  # the torch-op passes


def _int8_weight(rows_out: int, width: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows_out, width, generator=g)
    q, scale = quantize_weight(w)
    return q, scale, torch.randn(rows_out, generator=g)


@pytest.mark.parametrize("engine", ["qlinear", "onednn", "fbgemm", "x86"])
def test_rows_are_quantised_one_scale_each_whatever_shares_the_call(monkeypatch, engine):
    """Per-token activation scales (sru/ops/cpu/int8.py): a row of 1,000x larger values beside small ones
    leaves every row's error at int8 rounding (one scale per call gave the small rows ~100 % error), and a
    row's result is bit for bit the same alone, with other neighbours (and oneDNN's padding rows) or in a batch
    (oneDNN picks another kernel, with another last rounding, under 16 rows: its calls are padded to 16)."""
    from sru.ops.cpu import int8
    if engine not in int8.usable_engines():
        pytest.skip(f"no {engine} engine")
    monkeypatch.setenv(int8.INT8_ENGINE_VAR, engine)
    q, scale, bias = _int8_weight(24, 40, seed=1)
    g = torch.Generator().manual_seed(2)
    x = torch.randn(37, 40, generator=g) * torch.rand(37, 1, generator=g)
    x[5] *= 1000.0
    x[6] = x[6].abs() + 0.5  # all positive: its own range would not include 0
    want = torch.nn.functional.linear(x, q.float() * scale[:, None])
    with torch.no_grad():
        got = int8.int8_linear(x, q, scale, bias)
        err = (got - bias - want).norm(dim=1) / want.norm(dim=1)
        assert err.max() < 0.02, err
        for i in (0, 5, 6, 36):
            others = x[(i + 1) % 37:(i + 1) % 37 + 1].expand(16, -1) * 7.0
            beside = int8.int8_linear(torch.cat([x[i:i + 1], others]), q, scale, bias)[0]
            assert torch.equal(beside, got[i]), i
            for n in (1, 2, 5):
                assert torch.equal(int8.int8_linear(torch.cat([x[i:i + 1], others[:n - 1]]), q, scale, bias)[0], got[i])
    bad = torch.randn(3, 40)
    bad[1, 7] = float("nan")
    with torch.no_grad():
        out = int8.int8_linear(bad, q, scale, bias)
    assert out[1].isnan().all() and not out[[0, 2]].isnan().any()  # a NaN row stays NaN, as in float32


def test_onednn_rows_are_padded_to_few_sizes():
    """oneDNN builds a kernel per row count, so int8 products pad their rows to one of 8 sizes per power of two."""
    from sru.ops.cpu import int8
    assert {int8.onednn_int8_rows(r) for r in range(512, 1024)} == set(range(512, 1025, 64))
    assert all(r <= int8.onednn_int8_rows(r) <= r * 9 / 8 for r in range(1, 5000))


def test_small_and_narrow_products_run_in_float32_with_the_int8_weights(monkeypatch):
    """Where the int8 kernel is slower than float32 here (fewer multiply-adds than INT8_MIN_WORK gives the weight's
    width, or a width under every floor) a product computes exactly F.linear with the dequantised weight."""
    from sru.ops.cpu import int8
    q, scale, bias = _int8_weight(24, 40, seed=3)  # width 40 * 24 / (40 + 24) = 15
    small, large = torch.randn(9, 40), torch.randn(10, 40)
    monkeypatch.setattr(int8, "INT8_MIN_WORK", {15: 40 * 24 * 10, 200: 1})
    with torch.no_grad():
        assert not int8_ran(lambda: int8.int8_linear(small, q, scale, bias))
        assert torch.equal(int8.int8_linear(small, q, scale, bias),
                           torch.nn.functional.linear(small, q.float() * scale[:, None], bias))
        assert int8_ran(lambda: int8.int8_linear(large, q, scale, bias))
        monkeypatch.setattr(int8, "INT8_MIN_WORK", {16: 1})
        assert not int8_ran(lambda: int8.int8_linear(large, q, scale, bias))
    monkeypatch.undo()  # the real thresholds (also the int8_kernels_on_tiny_products fixture's)
    assert int8.takes_int8(torch.randn(1, 256), torch.zeros(4000, 256, dtype=torch.int8)) is False  # autograd on
    with torch.no_grad():
        assert int8.takes_int8(torch.randn(6, 256), torch.zeros(4000, 256, dtype=torch.int8))  # output layer, a beam
        assert int8.takes_int8(torch.randn(96, 256), torch.zeros(768, 256, dtype=torch.int8))  # an SRU, 96 rows
        assert not int8.takes_int8(torch.randn(36, 256), torch.zeros(768, 256, dtype=torch.int8))  # 36 rows
        assert int8.takes_int8(torch.randn(256, 256), torch.zeros(256, 256, dtype=torch.int8))  # attention, 256 rows
        assert not int8.takes_int8(torch.randn(96, 256), torch.zeros(256, 256, dtype=torch.int8))  # 96 rows

@pytest.mark.parametrize("batch", [1, 4])
def test_small_decode_steps_stay_on_the_fused_stack(monkeypatch, batch):
    """A B = 1-4 step of a 512-wide SRU is too small for int8 to beat the fused stack's own loop: with the real
    thresholds it runs that loop on the dequantised weights (no int8 kernel, no torch product), like fp32."""
    monkeypatch.undo()  # the real thresholds
    torch.manual_seed(0)
    quantized = sru.quantize_dynamic(sru.SRU(512, 512, num_layers=2).eval())
    x = torch.randn(1, batch, 512)
    with torch.no_grad():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            got = quantized(x)[0]
    names = {e.name for e in prof.events()}
    assert not names & {"quantized::linear_dynamic", "onednn::qlinear_pointwise", "aten::mm", "aten::addmm"}, names
    want = quantized(x)[0]  # autograd on: the same dequantised weights through torch's product
    assert rel_err(got, want) < 1e-5


def test_inference_mode_then_no_grad():
    """The int8 path's reused buffers are made outside inference_mode, so a model first run under
    torch.inference_mode() runs under torch.no_grad() afterwards (an inference tensor cannot be written there)."""
    from sru.ops.cpu import int8
    int8._local.__dict__.clear()  # as in a fresh process: the first int8 call makes it
    model, x = model_and_input("plain")
    quantized = sru.quantize_dynamic(model)
    with torch.inference_mode():
        first = quantized(x)[0]
    with torch.no_grad():
        assert torch.equal(quantized(x)[0], first) and int8_ran(lambda: quantized(x))
