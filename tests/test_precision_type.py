"""Precision as one type: the names defined once (``sru.Precision``), a quantised weight as a value of its
own type (``Int8Weight``) that copies, pickles, state_dicts and TorchScript carry with nothing reattached,
one Linear class for every precision, and no side channels (``__dict__`` writes) or reach into
``sru.ops.cpu`` from outside ``sru/ops``."""
import copy
import io
import pickle
import re
from pathlib import Path

import pytest
import torch

import sru
from sru.linear import DispatchedLinear
from sru.ops.backends import int8_engine
from sru.ops.precision import INFERENCE_NAMES, TRAINING_NAMES, Precision, of_autocast, parse
from sru.ops.quantized import Int8Weight

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for top in ("sru", "tasks", "bench", "reproduce", "scripts") for p in (ROOT / top).rglob("*.py")]
needs_int8 = pytest.mark.skipif(int8_engine() is None, reason="no x86/fbgemm/onednn quantised engine")


class Tagger(torch.nn.Module):
    """An SRU stack and a linear head, as the tasks' models."""

    def __init__(self):
        super().__init__()
        self.rnn = sru.SRU(32, 32, num_layers=2, projection_size=16)
        self.head = torch.nn.Linear(32, 600)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


def int8_ran(fn) -> bool:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        fn()
    return any("linear_dynamic" in e.name or "qlinear_pointwise" in e.name for e in prof.events())


def pickled(model):
    return pickle.loads(pickle.dumps(model))


def reloaded(model):
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    torch.manual_seed(7)
    other = sru.quantize_dynamic(Tagger().eval())  # other weights, the same structure
    other.load_state_dict(torch.load(buffer))
    return other


@needs_int8
@pytest.mark.usefixtures("int8_kernels_on_tiny_products")
@pytest.mark.parametrize("carry", [copy.deepcopy, pickled, reloaded], ids=["deepcopy", "pickle", "state_dict"])
def test_a_quantised_model_survives_copies_with_nothing_reattached(carry):
    torch.manual_seed(0)
    quantized = sru.quantize_dynamic(Tagger().eval())
    x = torch.randn(40, 8, 32)  # enough rows for the int8 kernel to pay
    copied = carry(quantized)
    assert all(isinstance(m, Int8Weight) for m in (copied.rnn.rnn_lst[0].weight_int8, copied.head.weight_int8))
    assert copied.rnn.rnn_lst[1].precision is Precision.INT8 and copied.head.precision is Precision.INT8
    with torch.no_grad():
        assert torch.equal(copied(x), quantized(x))
        assert int8_ran(lambda: copied(x))


@needs_int8
def test_one_linear_class_for_every_precision_and_tied_weights_stay():
    torch.manual_seed(0)
    embedding, head = torch.nn.Embedding(10, 32), torch.nn.Linear(32, 10)
    head.weight = embedding.weight  # tied, as the LM's softmax
    model = torch.nn.ModuleDict({"embedding": embedding, "head": head})
    before = embedding.weight.detach().clone()
    quantized = sru.quantize_dynamic(model, inplace=True)
    assert type(quantized["head"]) is DispatchedLinear and quantized["head"].precision == "int8"
    assert torch.equal(quantized["embedding"].weight, before)  # the embedding is not rounded to int8
    assert quantized["head"].gemm == "auto"  # gemm names a library, never a dtype


def test_precision_names_parse_and_refuse_in_one_line():
    assert parse("bf16", [Precision.FP32, Precision.BF16]) is Precision.BF16
    assert Precision.INT8 == "int8" and f"{Precision.BF16}" == "bf16" and Precision.BF16.autocast_dtype is torch.bfloat16
    assert INFERENCE_NAMES == ("fp32", "bf16", "int8") and TRAINING_NAMES == ("fp32", "bf16", "fp16")
    with pytest.raises(ValueError, match=r"^precision=fp8: expected one of \['fp32', 'bf16', 'int8'\]$"):
        parse("fp8", [Precision(n) for n in INFERENCE_NAMES])


def _hits(pattern: str, sources, skip=()):
    found = []
    for path in sources:
        rel = path.relative_to(ROOT).as_posix()
        if any(rel.startswith(s) for s in skip):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(pattern, line) and not line.lstrip().startswith("#"):
                found.append(f"{rel}:{number}: {line.strip()}")
    return found


def test_no_dict_writes_in_the_layer():
    """Attributes set through ``__dict__`` ride beside the module's structure: copies and exports lose them."""
    assert not _hits(r"__dict__\[[^\]]*\]\s*=[^=]", (ROOT / "sru").rglob("*.py"))


def test_nothing_outside_sru_ops_imports_the_cpu_backend():
    """``sru.ops.backends`` is the door into the kernels: ``sru.ops.cpu`` may change its layout freely."""
    pattern = r"^\s*(from\s+sru\.ops\.cpu\b|import\s+sru\.ops\.cpu\b|from\s+sru\.ops\s+import\s+.*\bcpu\b)"
    assert not _hits(pattern, SOURCES, skip=("sru/ops/",))


def test_the_precision_names_are_spelled_once():
    """A list of precision names (two or more quoted side by side) lives only in sru/ops/precision.py (the
    triton kernel's compile check lists tensor dtypes, fp64 and fp16-amp among them: not precisions)."""
    assert not _hits(r"""["'](fp32|bf16|fp16|int8)["']\s*,\s*["'](fp32|bf16|fp16|int8)["']""", SOURCES,
                     skip=("sru/ops/precision.py", "sru/ops/triton/compile_check.py"))


def test_the_route_table_picks_one_route_per_precision(monkeypatch):
    """Each precision reaches its route of sru/ops/cpu/routes.py: the weight's Int8Weight where int8 pays, bf16
    under autocast (or asked for explicitly), oneDNN when forced in fp32, torch's own product elsewhere."""
    from sru.ops.cpu import gemm, int8, routes
    from sru.ops.quantized import Int8Weight
    monkeypatch.setattr(int8, "INT8_MIN_WORK", {0: 0})
    x, w = torch.randn(64, 256), torch.randn(256, 768)
    q = Int8Weight.of(w.t())
    name = lambda call, x=x, linear=False: routes.route(x, w, call, linear).name  # noqa: E731
    fp32, bf16 = Precision.FP32, Precision.BF16
    with torch.no_grad():
        if int8_engine() is not None:
            assert name(routes.Call("auto", fp32, q, False)) == "int8"
        assert name(routes.Call("auto", fp32, q, False), x.double()) == "int8 as float"
        if gemm.onednn_available():
            assert name(routes.Call("onednn", fp32, None, False)) == "onednn"
            assert name(routes.Call("mkl", fp32, None, False)) == "torch"
            if gemm.onednn_packs_bf16():
                assert name(routes.Call("auto", bf16, None, False)) == "bf16 prepacked"
        assert name(routes.Call("auto", bf16, None, True), linear=True) == "autocast"  # Linear layers: torch's op
        with torch.autocast("cpu", torch.bfloat16):
            assert of_autocast() is Precision.BF16
            got = routes.matmul(x, w)
        want = routes.matmul(x, w, precision=Precision.BF16)  # explicit: the same product, no autocast around it
    assert got.dtype is torch.float32 and torch.equal(got, want)


@needs_int8
@pytest.mark.usefixtures("int8_kernels_on_tiny_products")
def test_a_whole_quantised_model_pickled_by_the_earlier_layout_loads_with_its_int8_weights():
    """Before Int8Weight a quantised cell held buffers weight_int8 / weight_scale and gemm="int8" in its
    ``__dict__``: such a pickle loads as a quantised cell with the same outputs."""
    torch.manual_seed(0)
    model = sru.SRU(32, 32, num_layers=1).eval()
    quantized = sru.quantize_dynamic(model)
    old = copy.deepcopy(model)
    cell, new_cell = old.rnn_lst[0], quantized.rnn_lst[0]
    with torch.no_grad():
        cell.weight.copy_(new_cell.weight)
    cell.register_buffer("weight_int8", new_cell.weight_int8.q.clone())
    cell.register_buffer("weight_scale", new_cell.weight_int8.scale.clone())
    state = dict(cell.__getstate__())
    state["gemm"], state["backend"] = "int8", state.pop("_backend")
    del state["_gemm"]
    cell.__dict__.clear()
    cell.__dict__.update(state)  # as the earlier version pickled it
    loaded = pickled(old)
    x = torch.randn(12, 4, 32)
    assert loaded.rnn_lst[0].precision is Precision.INT8 and loaded.gemm == "auto"
    with torch.no_grad():
        assert torch.equal(loaded(x)[0], quantized(x)[0]) and int8_ran(lambda: loaded(x))
