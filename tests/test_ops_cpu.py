"""CPU-kernel specifics: thread-count independence, ``auto`` dispatch, no state kept at
inference, ``torch.compile(fullgraph=True)``, and the dispatcher's bad-input errors.

Fused-vs-reference correctness (every option, awkward sizes, gradcheck, bf16/fp16, padding,
non-contiguous inputs) is in tests/test_ops_backends.py, shared with the Triton backend.
Skipped, with the reason, only if the kernel cannot be built here.
"""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from sru.ops import available_backends, elementwise_recurrence, elementwise_recurrence_reference
from sru.ops.cpu import load_error, load_library
from sru.testing import as_float64, backend_fn, forward_backward, make_inputs, upstream_grads


@pytest.fixture(scope="module", autouse=True)
def cpu_kernel():
    if load_library() is None:
        pytest.skip(f"fused CPU kernel could not be built: {load_error()}")


fused = backend_fn("cpu")


def test_gradients_do_not_depend_on_thread_count():
    """weight_c/bias grads are reduced per task, then over the batch: no races, same bits."""
    args = make_inputs(L=9, B=16, d=300, dtype=torch.float32, mask_c=True)
    grad_h, grad_c = upstream_grads(args)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = forward_backward(fused, args, grad_h, grad_c)
        torch.set_num_threads(max(2, threads))
        many = forward_backward(fused, args, grad_h, grad_c)
    finally:
        torch.set_num_threads(threads)
    for name in one:
        assert torch.equal(one[name], many[name]), name


@pytest.mark.parametrize("threads,B,d", [(1, 40, 2048), (2, 11, 64), (2, 3, 300), (2, 1, 300)])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("grad", [True, False])
def test_batch_groups_match_reference(threads, B, d, bidirectional, grad):
    """A unidirectional layer's forward and backward walk time outside and a group of batch rows
    inside (pick_group); groups that do not divide B (40 = 32 + 8 rows on one thread at d = 2048;
    one block per thread on two: 11 = 6 + 5, 3 = 2 + 1; a single row split into two chunks of
    units), padded steps, a dropout mask and the bidirectional layout (one row per task) give the
    reference's h, c_last and every gradient, with states stored (training) or carried in place
    (inference)."""
    args = make_inputs(L=4, B=B, d=d, bidirectional=bidirectional, dtype=torch.float32, c0=True,
                       mask_c=True, lengths="random", seed=3)
    if not grad:
        args = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in args.items()}

    def outputs(fn):
        """h and c_last, plus every gradient when grad is on."""
        with torch.set_grad_enabled(grad):
            if grad:
                return forward_backward(fn, args, *upstream_grads(args))
            return dict(zip(("h", "c_last"), fn(**args)))

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        got = outputs(fused)
    finally:
        torch.set_num_threads(before)
    want = outputs(elementwise_recurrence_reference)
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-5, msg=name)


def test_tanh_is_accurate_near_zero():
    """|c| ~ 1e-4: (1 - e) / (1 + e) with e = exp(-2|c|) would lose ~4 digits to cancellation;
    the kernels' short series below |c| = 0.04 keeps h = r tanh(c) to float rounding, in the
    AVX2 step (the first 32 units) and in the generic loop (the last 5)."""
    args = make_inputs(L=6, B=4, d=37, dtype=torch.float32, c0=True, seed=4)
    args = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    args["U"], args["c0"] = args["U"] * 1e-4, args["c0"] * 1e-4
    options = dict(activation="tanh", has_skip_term=False)
    with torch.no_grad():
        h, c = fused(**args, **options)
    want = elementwise_recurrence_reference(**as_float64(args), **options)
    torch.testing.assert_close(h.double(), want[0], rtol=1e-5, atol=1e-10)
    torch.testing.assert_close(c.double(), want[1], rtol=1e-5, atol=1e-10)


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


@pytest.mark.slow
def test_torch_compile_fullgraph_matches_eager():
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
    with torch.compiler.config.patch(force_disable_caches=True):
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
