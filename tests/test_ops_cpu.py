"""The fused CPU recurrence against the PyTorch reference: outputs, gradients, dtypes, inputs.

Every comparison draws random upstream gradients for both h and c_last, so a wrong gradient
anywhere (U, x, weight_c, bias, c0) shows. float64 must agree to rounding; float32 within a
small relative error. Skipped, with the reason, only if the kernel cannot be built here.
"""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sru.ops import available_backends, elementwise_recurrence, elementwise_recurrence_reference
from sru.ops.cpu import load_error, load_library


@pytest.fixture(scope="module", autouse=True)
def cpu_kernel():
    if load_library() is None:
        pytest.skip(f"fused CPU kernel could not be built: {load_error()}")


def make_inputs(L=5, B=3, d=7, bidirectional=False, k=3, dtype=torch.float64, c0=False,
                mask_c=False, lengths=None, per_step=False, seed=0):
    """Random recurrence inputs (leaves that require grad) plus options, as keyword args."""
    g = torch.Generator().manual_seed(seed)
    dirs = 2 if bidirectional else 1
    width = dirs * d

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(dtype)

    weight_c = rand(L, B, width * 2, scale=0.5) if per_step else rand(2 * width, scale=0.5)
    args = dict(U=rand(L, B, width * k), x=rand(L, B, width), weight_c=weight_c,
                bias=rand(2 * width, scale=0.5), c0=rand(B, width) if c0 else None)
    for t in args.values():
        if t is not None:
            t.requires_grad_(True)
    if mask_c:  # a dropout mask, scaled like the module's; mask_c="grad": a leaf needing grad
        args["mask_c"] = (torch.rand(B, width, generator=g) > 0.3).to(dtype) / 0.7
        args["mask_c"].requires_grad_(mask_c == "grad")
    if lengths is not None:  # true = padding after each sequence's length
        args["mask_pad"] = torch.arange(L)[:, None] >= torch.tensor(lengths)[None, :]
    args.update(hidden_size=d, bidirectional=bidirectional)
    return args


def run(fn, args, seed=1, **options):
    """Outputs and input gradients of ``fn`` under random upstream grads for h and c_last."""
    h, c = fn(**args, **options)
    g = torch.Generator().manual_seed(seed)
    gh = torch.randn(h.shape, generator=g, dtype=torch.float64).to(h.dtype)
    gc = torch.randn(c.shape, generator=g, dtype=torch.float64).to(c.dtype)
    leaves = [t for t in args.values() if isinstance(t, torch.Tensor) and t.requires_grad]
    grads = torch.autograd.grad((h, c), leaves, (gh, gc), allow_unused=True)
    return [h, c] + [torch.zeros_like(t) if gr is None else gr for t, gr in zip(leaves, grads)]


def fused(**kw):
    return elementwise_recurrence(**kw, backend="cpu")


def assert_close(got, want, dtype):
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape and a.dtype == b.dtype, (i, a.shape, b.shape, a.dtype, b.dtype)
        assert torch.isfinite(a).all(), i
        if dtype == torch.float64:
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-11, msg=f"tensor {i}")
        else:
            rel = (a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-12)
            assert rel < 2e-5, f"tensor {i}: relative error {rel:.2e}"


CASES = {
    "uni": dict(),
    "bi": dict(bidirectional=True),
    "k4": dict(k=4),
    "k4-bi": dict(k=4, bidirectional=True),
    "c0-dropout": dict(c0=True, mask_c=True, bidirectional=True),
    "mask-grad": dict(c0=True, mask_c="grad", k=4, lengths=[5, 2, 3]),
    "mask-grad-tanh": dict(mask_c="grad", bidirectional=True, options=dict(activation="tanh")),
    "padded": dict(B=4, lengths=[5, 2, 4, 1], c0=True),
    "padded-bi-k4": dict(B=4, lengths=[5, 3, 1, 4], bidirectional=True, k=4, mask_c=True),
    "no-skip": dict(options=dict(has_skip_term=False)),
    "no-skip-k4": dict(k=4, bidirectional=True, options=dict(has_skip_term=False)),
    "tanh": dict(c0=True, options=dict(activation="tanh")),
    "tanh-int": dict(bidirectional=True, mask_c=True, options=dict(activation=1)),
    "per-step-weights": dict(per_step=True, c0=True, bidirectional=True, lengths=[5, 3, 4]),
    "scale-x": dict(options=dict(scale_x=1.7)),
    "L1": dict(L=1, c0=True, bidirectional=True),
    "B1": dict(B=1, d=33, k=4),
    "awkward": dict(L=63, B=2, d=500, mask_c=True, lengths=[63, 40]),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_matches_reference(case, dtype):
    spec = dict(CASES[case])
    options = spec.pop("options", {})
    args = make_inputs(dtype=dtype, **spec)
    reference_options = dict(options)
    if reference_options.get("activation") == 1:
        reference_options["activation"] = "tanh"  # the reference speaks names only
    want = run(elementwise_recurrence_reference, args, **reference_options)
    assert_close(run(fused, args, **options), want, dtype)


@pytest.mark.parametrize("used", ["h", "c_last"])
def test_only_one_output_used(used):
    """The unused output's gradient arrives as None; it must count as zero."""
    args = make_inputs(bidirectional=True, c0=True, lengths=[5, 3, 2])
    leaves = [args[n] for n in ("U", "x", "weight_c", "bias", "c0")]
    grads = []
    for fn in (elementwise_recurrence_reference, fused):
        h, c = fn(**args)
        out = h if used == "h" else c
        weights = torch.linspace(-1, 1, out.shape[-1], dtype=out.dtype)
        found = torch.autograd.grad((out * weights).sum(), leaves, allow_unused=True)
        grads.append([torch.zeros_like(t) if g is None else g for t, g in zip(leaves, found)])
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-11)


@pytest.mark.parametrize("spec", [
    dict(bidirectional=True, c0=True, mask_c="grad", lengths=[4, 2]),
    dict(k=4, per_step=True, c0=True, lengths=[3, 4], options=dict(activation="tanh")),
], ids=["bi-k3-masks", "k4-tanh-per-step"])
def test_gradcheck(spec):
    spec = dict(spec)
    options = spec.pop("options", {})
    args = make_inputs(L=4, B=2, d=3, **spec)
    names = [n for n, t in args.items() if isinstance(t, torch.Tensor) and t.requires_grad]
    fixed = {n: t for n, t in args.items() if n not in names}

    def f(*leaves):
        return fused(**fixed, **dict(zip(names, leaves)), scale_x=1.3, **options)

    assert torch.autograd.gradcheck(f, [args[n] for n in names])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_computed_in_float32(dtype):
    args = make_inputs(B=4, d=16, dtype=dtype, c0=True, mask_c=True, lengths=[5, 3, 1, 4])
    got = run(fused, args)
    up = {n: (t.detach().float().requires_grad_(t.requires_grad)
              if isinstance(t, torch.Tensor) and t.is_floating_point() else t)
          for n, t in args.items()}
    want = run(elementwise_recurrence_reference, up)
    for a, b in zip(got, want):
        assert a.dtype == dtype  # outputs in the input dtype, grads in the params' dtypes
        torch.testing.assert_close(a.float(), b.to(dtype).float(), rtol=2e-2, atol=2e-2)


def test_non_contiguous_inputs():
    args = make_inputs(B=3, d=8, bidirectional=True, c0=True, mask_c=True, lengths=[5, 2, 4])
    strided = dict(args)
    # Same values, other memory layouts: U and x batch-first then transposed, c0 transposed.
    for name in ("U", "x"):
        strided[name] = args[name].detach().transpose(0, 1).contiguous().transpose(0, 1)
        strided[name].requires_grad_(True)
        assert not strided[name].is_contiguous()
    strided["c0"] = args["c0"].detach().t().contiguous().t().requires_grad_(True)
    strided["mask_pad"] = args["mask_pad"].t().contiguous().t()
    assert_close(run(fused, strided), run(fused, args), torch.float64)


def test_gradients_do_not_depend_on_thread_count():
    """weight_c/bias grads are reduced per task, then over the batch: no races, same bits."""
    args = make_inputs(L=9, B=16, d=300, dtype=torch.float32, mask_c=True)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = run(fused, args)
        torch.set_num_threads(max(2, threads))
        many = run(fused, args)
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(one, many):
        assert torch.equal(a, b)


class _OpLog(TorchDispatchMode):
    """Records every op that reaches the dispatcher, with its outputs' shapes."""

    def __init__(self):
        super().__init__()
        self.ops, self.shapes = [], {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.ops.append(str(func))
        if isinstance(out, (tuple, list)):
            self.shapes[str(func)] = [tuple(t.shape) for t in out if isinstance(t, torch.Tensor)]
        return out


def test_auto_uses_fused_kernel_on_cpu():
    assert "cpu" in available_backends()
    args = make_inputs()
    with _OpLog() as log:
        h, _ = elementwise_recurrence(**args)
    assert any("sru.recurrence_fwd" in op for op in log.ops), log.ops
    torch.testing.assert_close(h, elementwise_recurrence(**args, backend="cpu")[0])


def test_inference_keeps_no_states():
    """Under no_grad the (L, B, dirs*d) history of c that backward needs is not written."""
    args = make_inputs(dtype=torch.float32)
    with _OpLog() as log:
        fused(**args)
    assert log.shapes["sru.recurrence_fwd.default"][2] == (5, 3, 7)
    with torch.no_grad(), _OpLog() as log:
        h, c = fused(**args)
    assert log.shapes["sru.recurrence_fwd.default"][2] == (0,)
    want = elementwise_recurrence_reference(**args)
    torch.testing.assert_close(h, want[0].detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c, want[1].detach(), rtol=1e-5, atol=1e-5)


def test_torch_compile_fullgraph_matches_eager():
    import torch._functorch.config
    import torch._inductor.config

    args = make_inputs(L=4, B=2, d=8, dtype=torch.float32, c0=True, mask_c=True, lengths=[4, 2])

    def loss(U, x, weight_c, bias, c0):
        h, c = elementwise_recurrence(U, x, weight_c, bias, c0, 8, mask_c=args["mask_c"],
                                      mask_pad=args["mask_pad"], scale_x=1.5)
        return (h * h).sum() + c.sum()

    leaves = [args[n] for n in ("U", "x", "weight_c", "bias", "c0")]
    eager = loss(*leaves)
    eager_grads = torch.autograd.grad(eager, leaves)
    # Compile for real, not from torch's on-disk caches: their keys do not cover a custom op's
    # Python implementation, so an entry from an older version of this op could be replayed.
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        compiled = torch.compile(loss, fullgraph=True)
        got = compiled(*leaves)
        got_grads = torch.autograd.grad(got, leaves)
    torch.testing.assert_close(got, eager)
    for a, b in zip(got_grads, eager_grads):
        torch.testing.assert_close(a, b)


BAD_INPUTS = [
    (dict(U=torch.randn(5, 3)), "U must be 3-D"),
    (dict(U=torch.randn(5, 3, 7 * 5)), "last dim"),
    (dict(x=torch.randn(5, 3, 6)), "x must have shape"),
    (dict(x=None), "x of shape"),
    (dict(weight_c=torch.randn(13)), "weight_c must have shape"),
    (dict(bias=torch.randn(7)), "bias must have shape"),
    (dict(c0=torch.randn(2, 7)), "c0 must have shape"),
    (dict(mask_c=torch.ones(3, 8)), "mask_c must have shape"),
    (dict(mask_pad=torch.zeros(3, 5, dtype=torch.bool)), "mask_pad must have shape"),
    (dict(U=torch.randint(0, 3, (5, 3, 21))), "floating-point"),
    (dict(activation="relu"), "activation"),
    (dict(backend="cuda"), "backend"),
    (dict(hidden_size=0), "hidden_size"),
]


@pytest.mark.parametrize("bad,match", BAD_INPUTS, ids=[m for _, m in BAD_INPUTS])
def test_bad_inputs_raise_one_clear_error(bad, match):
    args = {n: (t.detach() if isinstance(t, torch.Tensor) else t)
            for n, t in make_inputs(dtype=torch.float32).items()}
    args.update(bad)
    with pytest.raises(ValueError, match=match) as info:
        elementwise_recurrence(**args)
    assert "received" in str(info.value)  # names what it got, beside what it expected
