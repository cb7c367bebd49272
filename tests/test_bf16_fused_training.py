"""bf16 training through the fused CPU layer (issue 69 item 3): under ``torch.autocast("cpu", torch.bfloat16)``
a plain k = 3 layer takes the ``fused training`` route, its three products in bf16 and the kernel reading U as
bf16 (widened as it reads, grad U narrowed as it writes) while the recurrence and every other gradient stay
float32. Checked here: the route is taken where it should be (and only there), the kernel's bf16 entry computes
exactly what its float32 entry computes on the same values, and outputs and every gradient match fp32 within
bf16's tolerance and the general (unfused) bf16 path to float rounding."""
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from sru import SRU, SRUCell, Precision, forward_routes
from sru.forward_routes import Route, choose_route
from sru.ops import available_backends
from sru.ops.backends import cpu_kernel as kernel, load_library
from sru.testing import TOLERANCE, rel_err

pytestmark = pytest.mark.skipif("cpu" not in available_backends(), reason="the fused CPU kernel does not build here")
BF16 = TOLERANCE[torch.bfloat16]


def fused_in_graph(out: torch.Tensor) -> bool:
    """Whether the fused layer's backward node is in ``out``'s autograd graph (a layer norm may follow it)."""
    todo, seen = [out.grad_fn], set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__ == "_LinearRecurrenceBackward":
            return True
        todo.extend(next_node for next_node, _ in node.next_functions)
    return False


def test_bf16_autocast_takes_the_fused_route_for_a_plain_layer_only():
    x = torch.randn(4, 2, 8, requires_grad=True)
    with Precision.BF16.autocast("cpu"):
        for cell in (SRUCell(8, 8), SRUCell(8, 4, bidirectional=True), SRUCell(8, 8, use_tanh=True),
                     SRUCell(8, 8, layer_norm=True, normalize_after=True)):
            assert choose_route(cell, x)[0] is Route.FUSED
            assert fused_in_graph(cell(x)[0])
        # pre-layer-norm (the skip input is not the product's), k = 4, a float64 layer: the general body
        for cell in (SRUCell(8, 8, layer_norm=True), SRUCell(8, 6), SRUCell(8, 8).double()):
            assert choose_route(cell, x.to(cell.weight.dtype)[..., :cell.input_size])[0] is Route.GENERAL
    with torch.autocast("cpu", dtype=torch.float16):  # no fused route for fp16
        assert choose_route(SRUCell(8, 8), x)[0] is Route.GENERAL


def _kernel_inputs(U_dtype, bidirectional, k):
    torch.manual_seed(0)
    L, B, d = 6, 3, 37  # 37 units: the vector steps and their scalar tail
    dirs = 2 if bidirectional else 1
    U = torch.randn(L, B, dirs * d * k).to(U_dtype)
    x = torch.randn(L, B, dirs * d) if k == 3 else None
    weight_c, bias = torch.randn(2 * dirs * d), torch.randn(2 * dirs * d)
    c0, pad = torch.randn(B, dirs * d), (torch.arange(L)[:, None] >= torch.tensor([6, 3, 5])).to(torch.uint8)
    options = kernel.KernelOptions(d, dirs, 1 if k == 3 else 2, True, 0.5)
    return (U, x, weight_c, bias, c0, None, pad), options, torch.randn(L, B, dirs * d), torch.randn(B, dirs * d)


@pytest.mark.parametrize("bidirectional, k", [(False, 3), (True, 3), (False, 4)])
def test_the_kernel_reads_a_bf16_U_as_its_float32_values(bidirectional, k):
    """The bf16 entry on U equals the float32 entry on U.float(), and its grad U is that grad U in bf16: bit for
    bit for k = 3, where both entries run the same vector loops; to float rounding for k = 4, which the bf16
    entry runs through its generic loop (another FMA contraction)."""
    exact = dict(rtol=0, atol=0) if k == 3 else dict(rtol=1e-5, atol=1e-6)
    lib = load_library()
    inputs, options, grad_h, grad_c = _kernel_inputs(torch.bfloat16, bidirectional, k)
    wide = (inputs[0].float(), *inputs[1:])
    results = {}
    for name, ins in (("bf16", inputs), ("fp32", wide)):
        h, c_last, c_all = kernel.forward(lib, ins, options, True)
        grads = kernel.backward(lib, (grad_h, grad_c), ins, c_all, options, False)
        results[name] = (h, c_last, *grads)
    got, want = results["bf16"], results["fp32"]
    assert got[0].dtype is torch.float32 and got[2].dtype is torch.bfloat16 and got[3].dtype is torch.float32
    rounded_as_torch_does = want[2].to(torch.bfloat16)
    torch.testing.assert_close(got[2], rounded_as_torch_does, **(exact if k == 3 else dict(rtol=2 ** -8, atol=1e-6)))
    for a, b in zip(got[:2] + got[3:], want[:2] + want[3:]):
        torch.testing.assert_close(a, b, **exact)


def _train_step(model, x, c0, mask_pad, upstream, precision, seed=3):
    model.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_()
    c0 = c0.clone().requires_grad_()
    torch.manual_seed(seed)  # the same dropout masks in every run
    with precision.autocast("cpu"):
        h, c = model(x, c0, mask_pad=mask_pad)
    (h * upstream).sum().backward(retain_graph=True)
    c.sum().backward()
    return h, [h, c, x.grad, c0.grad] + [p.grad for p in model.parameters()]


CONFIGS = {"plain": dict(), "bidirectional": dict(bidirectional=True),
           "layer norm": dict(layer_norm=True, normalize_after=True),
           "tanh, dropout": dict(use_tanh=True, dropout=0.2, rescale=True)}


@pytest.mark.parametrize("config", CONFIGS, ids=list(CONFIGS))
def test_bf16_fused_training_matches_fp32_and_the_general_path(config, monkeypatch):
    torch.manual_seed(0)
    model = SRU(32, 16, num_layers=2, **CONFIGS[config]).train()
    width = model.output_size
    x, c0 = torch.randn(12, 5, 32), torch.randn(2, 5, width)
    mask_pad = torch.arange(12)[:, None] >= torch.tensor([12, 7, 10, 12, 3])
    upstream = torch.randn(12, 5, width)
    fp32 = _train_step(model, x, c0, mask_pad, upstream, Precision.FP32)[1]
    h, fused = _train_step(model, x, c0, mask_pad, upstream, Precision.BF16)
    assert fused_in_graph(h)
    monkeypatch.setattr(forward_routes, "fuse_layer", lambda *args: False)
    h_general, general = _train_step(model, x, c0, mask_pad, upstream, Precision.BF16)
    assert not fused_in_graph(h_general)
    for got, want, unfused in zip(fused, fp32, general):
        assert got.dtype is torch.float32  # the recurrence's state and every gradient: float32
        assert rel_err(got, want) < 2 * BF16  # two layers of bf16 products, forward and backward
        assert rel_err(got, unfused) < 1e-5   # the same bf16 products, the same float32 recurrence


def test_the_fused_route_is_taken_under_bf16_autocast_in_a_stack(monkeypatch):
    seen = []

    def spy(*args, **kwargs):
        seen.append(choose_route(*args, **kwargs))
        return seen[-1]
    monkeypatch.setattr("sru.modules.choose_route", spy)
    model = SRU(16, 16, num_layers=2, bidirectional=False)
    with Precision.BF16.autocast("cpu"):
        h, _ = model(torch.randn(5, 2, 16, requires_grad=True))
    assert [route for route, _ in seen] == [Route.GENERAL, Route.FUSED, Route.FUSED]
    assert fused_in_graph(h)


def test_bf16_fused_training_on_packed_input():
    torch.manual_seed(0)
    model = SRU(16, 16, num_layers=2)
    x, lengths = torch.randn(7, 3, 16), torch.tensor([7, 3, 5])
    upstream = torch.randn(7, 3, 16)
    runs = []
    for precision in (Precision.FP32, Precision.BF16):
        model.zero_grad(set_to_none=True)
        inp = x.clone().requires_grad_()
        with precision.autocast("cpu"):
            h = pad_packed_sequence(model(pack_padded_sequence(inp, lengths, enforce_sorted=False))[0])[0]
        (h * upstream).sum().backward()
        runs.append([h, inp.grad] + [p.grad for p in model.parameters()])
    for got, want in zip(*runs):
        assert got.dtype is torch.float32 and rel_err(got, want) < 2 * BF16


def test_the_training_bench_splits_the_step_into_products_recurrence_and_rest():
    from bench.precision import training
    fns, failed = training.runnable(training.candidates(4, 2, 16))
    assert {"SRU bf16", "GEMM bound bf16", "recurrence bf16", "recurrence fp32"} <= set(fns) and not failed
    summary = {name: {"median_ms": ms} for name, ms in (("SRU bf16", 10.0), ("GEMM bound bf16", 8.0),
                                                        ("recurrence bf16", 1.5))}
    assert training.split(summary, "bf16") == ("- the bf16 step's split: its GEMMs 80%, the fused recurrence 15%, "
                                               "the rest 5%")
    assert "not measured" in training.split(summary, "fp32")
