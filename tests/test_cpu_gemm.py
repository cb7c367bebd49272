"""The CPU GEMM dispatch (sru/ops/cpu/gemm.py, issue 55): every SRU / SRU++ option gives the same
outputs and gradients with gemm="onednn", "mkl" and "auto" (and the reference recurrence), the
oneDNN route really runs oneDNN, prepacked weights follow optimizer updates, and the cached
choice is per thread count, visible and forcible."""
import copy
import logging

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence

import sru
from sru.linear import DispatchedLinear, dispatch_linears
from sru.ops.cpu import gemm, routes
from sru.testing import rel_err

pytestmark = pytest.mark.skipif(not gemm.onednn_available(), reason="this torch has no oneDNN")

LIBS = ("mkl", "onednn", "auto")
OPTIONS = {
    "plain": {},
    "bidirectional": {"bidirectional": True},
    "projection": {"projection_size": 5},
    "layer_norm": {"layer_norm": True},
    "k4_skip": {"project_skip": True},
    "tanh_rescale": {"use_tanh": True, "rescale": True},
}


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.delenv(gemm.ENV_VAR, raising=False)
    gemm.clear_cpu_gemm_cache()
    yield
    gemm.clear_cpu_gemm_cache()


def onednn_ran(fn) -> bool:
    """Whether ``fn()`` called oneDNN's linear (the profiler sees ops without a dispatch mode)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return any("_linear_pointwise" in e.name for e in prof.events())


def run_sru(model, x, packed_lengths=None):
    """(outputs, grads of input and parameters) of a forward + backward."""
    x = x.clone().requires_grad_()
    inp = x if packed_lengths is None else pack_padded_sequence(x, packed_lengths, enforce_sorted=False)
    h, c = model(inp)[:2]  # SRUpp also returns its memory
    h = h if packed_lengths is None else h.data
    gen = torch.Generator().manual_seed(3)
    (h * torch.randn(h.shape, generator=gen)).sum().add_((c * 0.5).sum()).backward()
    grads = [x.grad] + [p.grad for p in model.parameters()]
    return [h.detach(), c.detach()], grads


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("option", list(OPTIONS))
def test_sru_options_equal_across_libraries(option, packed):
    torch.manual_seed(0)
    base = sru.SRU(8, 8 if option != "bidirectional" else 4, num_layers=2, **OPTIONS[option])
    x = torch.randn(7, 3, 8)
    lengths = torch.tensor([7, 4, 2]) if packed else None
    reference = copy.deepcopy(base)
    reference.backend, reference.gemm = "reference", "mkl"
    want_out, want_grads = run_sru(reference, x, lengths)
    for lib in LIBS:
        model = copy.deepcopy(base)
        model.gemm = lib
        out, grads = run_sru(model, x, lengths)
        for got, want in zip(out + grads, want_out + want_grads):
            assert rel_err(got, want) < 2e-5, (option, lib)
        with torch.no_grad():  # the inference paths (stack / per layer)
            model.eval()
            h_inf = model(x if lengths is None else pack_padded_sequence(x, lengths, enforce_sorted=False))[0]
            h_inf = h_inf if lengths is None else h_inf.data
            assert rel_err(h_inf, want_out[0]) < 2e-5, (option, lib)


@pytest.mark.parametrize("training", [True, False])
def test_onednn_route_runs_onednn_and_mkl_does_not(training):
    model = sru.SRU(16, 16, num_layers=2, gemm="onednn")
    x = torch.randn(5, 4, 16)

    def step():
        if training:
            model(x.requires_grad_())[0].sum().backward()
        else:
            with torch.no_grad():
                model(x)
    assert onednn_ran(step)
    model.gemm = "mkl"
    assert not onednn_ran(step)


def test_inference_mode_and_weights_made_in_it():
    """Inference tensors have no version counter: the packs key on storage and shape there."""
    model = sru.SRU(16, 16, num_layers=2, gemm="onednn").eval()
    x = torch.randn(3, 2, 16)
    with torch.no_grad():
        want = model(x)[0]
    for lib in LIBS:
        model.gemm = lib
        with torch.inference_mode():
            assert rel_err(model(x)[0], want) < 2e-5
            made_here = sru.SRU(16, 16, num_layers=1, gemm=lib).eval()
            assert made_here(x)[0].shape == (3, 2, 16)


@pytest.mark.parametrize("attention", [True, False])
def test_srupp_equal_across_libraries(attention):
    torch.manual_seed(0)
    base = sru.SRUpp(8, 8, 6, num_layers=2, attention_every_n_layers=1 if attention else 3)
    x = torch.randn(6, 2, 8)
    results = {}
    for lib in LIBS:
        model = copy.deepcopy(base)
        model.gemm = lib
        results[lib] = run_sru(model, x)
    for lib in ("onednn", "auto"):
        for got, want in zip(sum(results[lib], []), sum(results["mkl"], [])):
            assert rel_err(got, want) < 2e-5, lib
    model = copy.deepcopy(base)
    model.gemm = "onednn"
    assert onednn_ran(lambda: model(x))


def test_srupp_decode_step_uses_the_dispatch():
    model = sru.SRUpp(8, 8, 6, num_layers=2, gemm="onednn").eval()
    x = torch.randn(4, 2, 8)
    with torch.no_grad():
        full = model(x)[0]
        cache, steps = None, []
        for t in range(4):
            h, cache = model.decode(x[t], cache)
            steps.append(h)
        assert rel_err(torch.stack(steps), full) < 2e-5
        assert onednn_ran(lambda: model.decode(x[0], cache))


def test_fp32_stays_fp32_and_float64_is_untouched():
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(300, 64, generator=gen), torch.randn(64, 96, generator=gen)
    exact = x.double().mm(w.double())
    got = routes.matmul(x, w, "onednn")
    assert got.dtype == torch.float32
    assert rel_err(got, exact) < 1e-6  # bf16 / tf32 would be ~1e-3
    assert not onednn_ran(lambda: routes.matmul(x.double(), w.double(), "onednn"))


def test_prepacked_weight_follows_optimizer_updates():
    torch.manual_seed(0)
    model = sru.SRU(16, 16, num_layers=2, gemm="onednn").eval()
    twin = copy.deepcopy(model)
    twin.gemm = "mkl"
    x = torch.randn(5, 3, 16)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    for _ in range(2):
        with torch.no_grad():
            assert rel_err(model(x)[0], twin(x)[0]) < 2e-5  # packs the weights
        model.train()
        model(x)[0].square().sum().backward()
        opt.step()  # in place: bumps the weights' version counters
        opt.zero_grad()
        model.eval()
        twin.load_state_dict(model.state_dict())
    with torch.no_grad():
        model.rnn_lst[0].weight.mul_(-1.0)  # any in-place write outside an optimizer
        twin.rnn_lst[0].weight.mul_(-1.0)
        assert rel_err(model(x)[0], twin(x)[0]) < 2e-5


def test_choice_is_cached_per_thread_count(monkeypatch):
    calls = []
    real = gemm.measure

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)
    monkeypatch.setattr(gemm, "measure", counting)
    x, w = torch.randn(40, 256), torch.randn(256, 512)
    threads = torch.get_num_threads()
    try:
        routes.matmul(x, w)
        routes.matmul(x, w)
        assert len(calls) == 1  # measured once, then cached
        routes.matmul(torch.randn(50, 256), w)  # same row bucket (64)
        assert len(calls) == 1
        routes.matmul(torch.randn(300, 256), w)  # a narrow product: measured at its own bucket (512) ...
        assert len(calls) == 2 and calls[-1][1] == 512
        routes.matmul(torch.randn(3000, 256), w)  # ... up to MEASURED_WORK_CAP multiply-adds (2,048 x 256 x 512)
        assert len(calls) == 3 and calls[-1][1] == 2048
        routes.matmul(torch.randn(5000, 256), w)  # ... which serves every larger product
        assert len(calls) == 3
        torch.set_num_threads(1 if threads > 1 else 2)
        routes.matmul(x, w)
        assert len(calls) == 4
    finally:
        torch.set_num_threads(threads)
    report = sru.ops.cpu_gemm_report()
    assert {r["threads"] for r in report} == {threads, 1 if threads > 1 else 2}
    assert all(r["choice"] in ("mkl", "onednn") for r in report)
    assert sorted(r["rows_up_to"] for r in report) == [64, 64, 512, 2048]


def test_wide_products_are_measured_at_the_row_cap():
    """Products over MEASURED_WORK_CAP multiply-adds share the choice of a smaller bucket, never under
    MEASURED_ROWS_CAP rows: measuring the 4,000-word output layer at 2,048 rows took 0.7 s."""
    assert gemm.measured_bucket(2000, 512, 4000) == gemm.MEASURED_ROWS_CAP
    assert gemm.measured_bucket(1000, 256, 768) == 1024  # the grid's L=32 B=32 d=256: where it runs
    assert gemm.measured_bucket(2000, 256, 768) == 1024  # 2,048 x 256 x 768 is over the cap
    assert gemm.measured_bucket(100, 4096, 4096) == 128  # at or under 256 rows: always its own bucket
    for rows in (1, 7, 300, 3000, 10 ** 5):
        bucket = gemm.measured_bucket(rows, 1024, 3072)
        assert bucket <= gemm.row_bucket(rows)
        assert bucket * 1024 * 3072 <= gemm.MEASURED_WORK_CAP or bucket == min(gemm.row_bucket(rows), 256)


def test_auto_picks_the_faster_library_on_either_kind_of_cpu(monkeypatch, caplog):
    """Intel-like timings keep MKL (ties too); AMD-like ones (oneDNN 2x) pick oneDNN; products
    under SMALL_WORK multiply-adds stay on MKL unmeasured (the same library in every process)."""
    x, w = torch.randn(40, 256), torch.randn(256, 512)
    for timings, want in (({"mkl_ms": 1.0, "onednn_ms": 0.99}, "mkl"),
                          ({"mkl_ms": 1.0, "onednn_ms": 1.2}, "mkl"),
                          ({"mkl_ms": 2.2, "onednn_ms": 1.0}, "onednn")):
        gemm.clear_cpu_gemm_cache()
        monkeypatch.setattr(gemm, "measure", lambda *a, t=timings, **k: dict(t))
        with caplog.at_level(logging.DEBUG, logger="sru.ops.cpu.gemm"):
            assert gemm.choose("fwd", 40, 256, 512) == want
            assert gemm.choose("fwd", 40, 16, 24) == "mkl"
        assert f"-> {want}" in caplog.text
        assert (want == "onednn") == onednn_ran(lambda: routes.matmul(x, w))


def test_environment_variable_forces_modules_left_at_auto(monkeypatch):
    model = sru.SRU(16, 16, num_layers=1)
    x = torch.randn(4, 2, 16)
    monkeypatch.setenv(gemm.ENV_VAR, "onednn")
    gemm.clear_cpu_gemm_cache()  # the variable is read at import and here
    assert onednn_ran(lambda: model(x.requires_grad_())[0].sum().backward())
    with torch.no_grad():
        assert onednn_ran(lambda: model(x))
    monkeypatch.setenv(gemm.ENV_VAR, "mkl")
    gemm.clear_cpu_gemm_cache()
    assert not onednn_ran(lambda: model(x))
    model.gemm = "onednn"  # the module's own choice wins over the environment
    assert onednn_ran(lambda: model(x))


def test_bad_gemm_names_the_choices():
    with pytest.raises(ValueError, match=r"gemm in \('auto', 'mkl', 'onednn'\)"):
        sru.SRU(4, 4, gemm="fast")
    with pytest.raises(ValueError, match="gemm in"):
        sru.SRUpp(4, 4, 2, gemm="blas")


def test_dispatched_linear_matches_nn_linear():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(12, 20), torch.nn.ReLU(), torch.nn.Linear(20, 7))
    x = torch.randn(5, 3, 12, requires_grad=True)
    want = net(x)
    want.sum().backward()
    want_grads = [x.grad.clone()] + [p.grad.clone() for p in net.parameters()]
    x.grad = None
    net.zero_grad()
    dispatched = dispatch_linears(copy.deepcopy(net), "onednn")
    assert all(isinstance(m, DispatchedLinear) for m in (dispatched[0], dispatched[2]))
    assert dispatched.state_dict().keys() == net.state_dict().keys()
    got = dispatched(x)
    got.sum().backward()
    assert rel_err(got, want) < 2e-5
    for g, w in zip([x.grad] + [p.grad for p in dispatched.parameters()], want_grads):
        assert rel_err(g, w) < 2e-5
    assert onednn_ran(lambda: dispatched(x))


def test_the_choice_is_timed_in_thread_cpu_time_on_one_thread():
    """On one thread the dispatch's samples do not count time descheduled by other processes (on a shared
    machine it pulled the MKL / oneDNN ratio towards 1); with more threads only wall time sees them all."""
    import time

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert gemm._clock() is time.thread_time
        torch.set_num_threads(2)
        assert gemm._clock() is time.perf_counter
    finally:
        torch.set_num_threads(threads)
