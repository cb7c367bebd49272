"""The Triton SRU recurrence against the reference loop (sru/ops/reference.py).

On a CUDA machine the kernels run compiled on the GPU. Without one they run on CPU tensors in
Triton's interpreter (TRITON_INTERPRET=1, set below for this module only), which checks the
kernels' logic: indexing, masks, both directions, padding, gradients. Without triton the
module is skipped. Shapes stay small because the interpreter is slow.
"""
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed: the Triton backend is untested")

from sru.ops.reference import elementwise_recurrence_reference  # noqa: E402
from sru.ops.triton import elementwise_recurrence_triton  # noqa: E402

ON_CUDA = torch.cuda.is_available()
DEVICE = "cuda" if ON_CUDA else "cpu"


@pytest.fixture(autouse=True, scope="module")
def triton_mode():
    """Interpret the kernels on CPU when there is no GPU; restore the environment afterwards.

    The kernels are jitted on first call (not at import), so setting the variable here works
    even when torch, triton or sru.ops.triton were imported earlier by other test files."""
    old = os.environ.get("TRITON_INTERPRET")
    if not ON_CUDA:
        os.environ["TRITON_INTERPRET"] = "1"
    yield
    if old is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = old


def make_inputs(L=5, B=3, d=4, bidirectional=False, k=3, dtype=torch.float64, c0=True,
                mask_c=False, mask_pad=False, per_step_w=False, seed=0):
    """Random leaf tensors for one layer; mask_pad gives mixed lengths (one sequence full)."""
    g = torch.Generator().manual_seed(seed)
    dirs = 2 if bidirectional else 1
    dd = dirs * d

    def leaf(*shape, scale=1.0):
        t = (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(DEVICE, dtype)
        return t.requires_grad_()

    inputs = dict(
        U=leaf(L, B, dd * k),
        x=leaf(L, B, dd),
        weight_c=leaf(L, B, dd * 2, scale=0.5) if per_step_w else leaf(2 * dd, scale=0.5),
        bias=leaf(2 * dd, scale=0.5),
        c0=leaf(B, dd) if c0 else None,
        hidden_size=d,
        bidirectional=bidirectional,
    )
    if mask_c:  # a time-shared dropout mask, already scaled
        keep = torch.rand(B, dd, generator=g) > 0.3
        inputs["mask_c"] = (keep.double() / 0.7).to(DEVICE, dtype)
    if mask_pad:
        lengths = torch.randint(1, L + 1, (B,), generator=g)
        lengths[0] = L
        inputs["mask_pad"] = (torch.arange(L)[:, None] >= lengths[None, :]).to(DEVICE)
    return inputs


def run(fn, inputs, grad_h, grad_c, **options):
    """Forward + backward with the given upstream grads; returns outputs and input grads."""
    h, c = fn(**inputs, **options)
    names = [n for n, t in inputs.items() if torch.is_tensor(t) and t.requires_grad]
    leaves = [inputs[n] for n in names]
    grads = torch.autograd.grad((h * grad_h).sum() + (c * grad_c).sum(), leaves,
                                allow_unused=True)
    return h, c, dict(zip(names, grads))


def as_float64(inputs):
    """Detached float64 copies (requires_grad kept), so the oracle runs at full precision."""
    out = {}
    for name, t in inputs.items():
        if torch.is_tensor(t) and t.is_floating_point():
            out[name] = t.detach().double().requires_grad_(t.requires_grad)
        else:
            out[name] = t
    return out


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-6)).item()


def compare(inputs, tol, **options):
    """Triton vs float64 reference: outputs and all gradients, random upstream grads."""
    ref_inputs = as_float64(inputs)
    h_ref, c_ref = elementwise_recurrence_reference(**ref_inputs, **options)
    g = torch.Generator().manual_seed(1)
    grad_h = torch.randn(h_ref.shape, generator=g, dtype=torch.float64).to(DEVICE)
    grad_c = torch.randn(c_ref.shape, generator=g, dtype=torch.float64).to(DEVICE)
    h, c, grads = run(elementwise_recurrence_triton, inputs, grad_h.to(inputs["U"].dtype),
                      grad_c.to(inputs["U"].dtype), **options)
    _, _, ref_grads = run(elementwise_recurrence_reference, ref_inputs, grad_h, grad_c, **options)

    assert h.dtype == inputs["U"].dtype and c.dtype == inputs["U"].dtype
    assert torch.isfinite(h).all() and torch.isfinite(c).all()
    assert rel_err(h, h_ref) < tol, ("h", rel_err(h, h_ref))
    assert rel_err(c, c_ref) < tol, ("c_last", rel_err(c, c_ref))
    for name, ref_grad in ref_grads.items():
        grad = grads[name]
        if ref_grad is None:  # an input the recurrence does not read (x when k=4)
            assert grad is None or not grad.any(), name
            continue
        assert grad is not None, f"no gradient for {name}"
        assert grad.dtype == inputs[name].dtype, name
        assert torch.isfinite(grad).all(), name
        assert rel_err(grad, ref_grad) < tol, (name, rel_err(grad, ref_grad))
    return h, c, grads


CASES = {
    "uni_k3_no_c0": (dict(c0=False), {}),
    "bi_k3": (dict(bidirectional=True), {}),
    "uni_k4": (dict(k=4), {}),
    "bi_k4_pad_dropout_tanh": (dict(bidirectional=True, k=4, mask_pad=True, mask_c=True),
                               dict(activation="tanh")),
    "no_skip_k3": (dict(), dict(has_skip_term=False)),
    "no_skip_k4": (dict(k=4, bidirectional=True), dict(has_skip_term=False)),
    "per_step_weights_bi_pad": (dict(per_step_w=True, bidirectional=True, mask_pad=True), {}),
    "scale_x_bi_pad_dropout": (dict(bidirectional=True, mask_pad=True, mask_c=True),
                               dict(scale_x=1.7)),
    "L1_B1_d1": (dict(L=1, B=1, d=1, bidirectional=True), dict(scale_x=0.5)),
    # 2*3*21 = 126 columns: four programs of 32 columns, the last one partly empty.
    "awkward_d21_L17": (dict(L=17, B=3, d=21, bidirectional=True, mask_pad=True, mask_c=True),
                        dict(activation="tanh")),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_reference(case, dtype):
    make, options = CASES[case]
    compare(make_inputs(dtype=dtype, **make), tol=1e-5 if dtype == torch.float32 else 1e-12,
            **options)


def test_scale_x_tensor_is_read_on_device():
    inputs = make_inputs(bidirectional=True)
    scale = torch.tensor(1.3, dtype=torch.float64, device=DEVICE)
    h, _ = elementwise_recurrence_triton(**inputs, scale_x=scale)
    h_ref, _ = elementwise_recurrence_reference(**inputs, scale_x=1.3)
    torch.testing.assert_close(h, h_ref, rtol=1e-12, atol=1e-12)


def test_inference_skips_the_history():
    """Without autograd the forward writes no c history, and h, c_last are unchanged."""
    inputs = make_inputs(bidirectional=True, mask_pad=True, dtype=torch.float32)
    h_train, c_train = elementwise_recurrence_triton(**inputs)
    with torch.no_grad():
        h, c = elementwise_recurrence_triton(**inputs)
    assert torch.equal(h, h_train) and torch.equal(c, c_train)
    detached = {n: t.detach() if torch.is_tensor(t) else t for n, t in inputs.items()}
    from sru.ops import triton as ops_triton
    args = [detached[n] for n in ("U", "x", "weight_c", "bias", "c0")]
    _, _, history = ops_triton._recurrence_forward(*args, None, None, None, 1.0, 4, 1, False,
                                                   False)
    assert history.numel() == 0


def test_padded_steps_are_inert():
    """On padding h is exactly 0, c carries over, and no gradient reaches U there."""
    inputs = make_inputs(L=6, B=3, d=3, bidirectional=True, mask_pad=True, dtype=torch.float32)
    pad = inputs["mask_pad"]
    h, c, grads = run(elementwise_recurrence_triton, inputs, torch.ones(6, 3, 6, device=DEVICE),
                      torch.ones(3, 6, device=DEVICE))
    assert pad.any()
    assert (h[pad] == 0).all()
    assert (grads["U"][pad] == 0).all()
    assert (grads["x"][pad] == 0).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs(dtype):
    """U in half precision (as from a matmul under autocast), parameters in fp32."""
    inputs = make_inputs(L=6, B=3, d=5, bidirectional=True, mask_pad=True, mask_c=True,
                         dtype=torch.float32)
    inputs["U"] = inputs["U"].detach().to(dtype).requires_grad_()
    inputs["x"] = inputs["x"].detach().to(dtype).requires_grad_()
    # bf16 has 8 mantissa bits: outputs/grads are rounded once at the end (state is fp32).
    compare(inputs, tol=2e-2 if dtype == torch.bfloat16 else 4e-3)


def test_under_autocast():
    """The layer's actual path: U = x @ W in an autocast region, then the recurrence."""
    d, dirs = 8, 2
    inputs = make_inputs(L=4, B=2, d=d, bidirectional=True, dtype=torch.float32)
    x_in = torch.randn(4, 2, 6, device=DEVICE)
    W = torch.randn(6, dirs * d * 3, device=DEVICE, requires_grad=True)
    dtype = torch.float16 if ON_CUDA else torch.bfloat16
    with torch.autocast(DEVICE, dtype=dtype):
        U = x_in @ W
        inputs["U"] = U
        h, c = elementwise_recurrence_triton(**inputs)
    assert U.dtype == dtype and h.dtype == dtype and c.dtype == dtype
    h.float().sum().backward()
    assert W.grad is not None and torch.isfinite(W.grad).all()
    assert inputs["weight_c"].grad.dtype == torch.float32


def test_amp_recurrence_fp16():
    """Official meaning: with fp16 U, every recurrence input is cast to fp16 (the parameters'
    grads still come back in their own fp32 dtype)."""
    inputs = make_inputs(L=5, B=2, d=4, bidirectional=True, mask_c=True, dtype=torch.float32)
    inputs["U"] = inputs["U"].detach().half().requires_grad_()
    h, c, grads = run(elementwise_recurrence_triton, inputs,
                      torch.ones(5, 2, 8, device=DEVICE, dtype=torch.float16),
                      torch.ones(2, 8, device=DEVICE, dtype=torch.float16),
                      amp_recurrence_fp16=True)
    assert h.dtype == torch.float16 and grads["weight_c"].dtype == torch.float32
    # The oracle sees the same fp16-rounded inputs.
    rounded = {n: (t.detach().half().double() if torch.is_tensor(t) and t.is_floating_point()
                   else t) for n, t in inputs.items()}
    h_ref, _ = elementwise_recurrence_reference(**rounded)
    assert rel_err(h, h_ref) < 2e-3


def test_gradcheck_float64():
    """Finite differences, including the dropout mask's gradient and per-step weights."""
    inputs = make_inputs(L=3, B=2, d=2, bidirectional=True, mask_pad=True, mask_c=True,
                         per_step_w=True)
    inputs["mask_c"].requires_grad_()
    names = ["U", "x", "weight_c", "bias", "c0", "mask_c"]

    def fn(*tensors):
        kwargs = dict(inputs, **dict(zip(names, tensors)))
        return elementwise_recurrence_triton(**kwargs, activation="tanh", scale_x=1.2)

    assert torch.autograd.gradcheck(fn, [inputs[n] for n in names], fast_mode=True)


def test_backward_is_deterministic():
    inputs = make_inputs(L=7, B=4, d=9, bidirectional=True, mask_pad=True, dtype=torch.float32)
    grad_h = torch.randn(7, 4, 18, device=DEVICE)
    grad_c = torch.randn(4, 18, device=DEVICE)
    _, _, first = run(elementwise_recurrence_triton, inputs, grad_h, grad_c)
    _, _, second = run(elementwise_recurrence_triton, inputs, grad_h, grad_c)
    for name in first:
        assert torch.equal(first[name], second[name]), name


def test_custom_op_registration():
    """Schema, fake (meta) impls and autograd registration agree with the real kernels, so
    torch.compile can trace through the op."""
    from sru.ops import triton as ops_triton

    inputs = make_inputs(L=3, B=2, d=3, bidirectional=True, mask_pad=True, mask_c=True,
                         dtype=torch.float32)
    mask_pad = inputs["mask_pad"].to(torch.uint8)
    args = (inputs["U"], inputs["x"], inputs["weight_c"], inputs["bias"], inputs["c0"],
            inputs["mask_c"], mask_pad, None, 1.0, 3, 1, True, True)
    torch.library.opcheck(ops_triton._recurrence_forward, args,
                          test_utils=("test_schema", "test_faketensor",
                                      "test_autograd_registration"))

    def layer(U, x):
        return elementwise_recurrence_triton(U, x, inputs["weight_c"], inputs["bias"],
                                             inputs["c0"], 3, bidirectional=True)

    compiled = torch.compile(layer, backend="aot_eager", fullgraph=True)
    h, c = compiled(inputs["U"], inputs["x"])
    h_eager, c_eager = layer(inputs["U"], inputs["x"])
    torch.testing.assert_close(h, h_eager)
    torch.testing.assert_close(c, c_eager)


@pytest.mark.parametrize("dtype, variant", [
    ("fp32", dict(K=3, SKIP=1, TANH=False, HAS_MASK_C=False, HAS_MASK_PAD=False,
                  PER_STEP_W=False, SCALE_FROM_PTR=False)),
    ("bf16", dict(K=4, SKIP=2, TANH=True, HAS_MASK_C=True, HAS_MASK_PAD=True,
                  PER_STEP_W=True, SCALE_FROM_PTR=True)),
])
def test_kernels_compile_for_hopper(monkeypatch, dtype, variant):
    """The interpreter does not type-check like the compiler: also compile both kernels to
    sm_90 machine code (PTX -> cubin, no GPU needed), so a compile error shows up in CI."""
    import triton
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError as err:  # an internal API moved: the runtime tests above still count
        pytest.skip(f"triton's compile API is not where expected: {err}")
    from sru.ops import triton as ops_triton

    monkeypatch.setenv("TRITON_INTERPRET", "0")  # a real JITFunction, not the interpreter's

    def signature(fn, constexprs):
        scalars = {"L": "i32", "B": "i32", "D": "i32", "DD": "i32", "scale_x": "fp32"}
        low = {"U", "X", "H", "C_LAST", "GRAD_H", "GRAD_U", "GRAD_X"}  # tensors in U's dtype
        sig = {}
        for name in fn.arg_names:
            if name in constexprs:
                sig[name] = "constexpr"
            elif name in scalars:
                sig[name] = scalars[name]
            else:
                sig[name] = "*u8" if name == "MASK_PAD" else f"*{dtype if name in low else 'fp32'}"
        return sig

    target = GPUTarget("cuda", 90, 32)
    constexprs = dict(variant, FP64=False, BLOCK=128)
    for kernel, extra in ((ops_triton._sru_forward_kernel, {}),
                          (ops_triton._sru_backward_kernel, dict(NEED_GRAD_MASK_C=True))):
        fn = triton.jit(kernel)
        cx = dict(constexprs, **extra)
        compiled = triton.compile(ASTSource(fn, signature(fn, cx), cx), target=target,
                                  options=dict(num_warps=4))
        assert compiled.asm["cubin"], kernel.__name__


def test_bad_input_names_the_fix():
    inputs = make_inputs(d=4)
    with pytest.raises(ValueError, match=r"U's last dim must be dirs\*d\*k"):
        elementwise_recurrence_triton(**dict(inputs, hidden_size=5))
    with pytest.raises(ValueError, match=r"c0 must have shape \(3, 4\)"):
        elementwise_recurrence_triton(**dict(inputs, c0=inputs["c0"][:2]))
    with pytest.raises(ValueError, match="mask_pad must have shape"):
        elementwise_recurrence_triton(**inputs, mask_pad=torch.zeros(2, 3, device=DEVICE))
    with pytest.raises(ValueError, match="x .* is required"):
        elementwise_recurrence_triton(**dict(inputs, x=None))
    with pytest.raises(ValueError, match="activation"):
        elementwise_recurrence_triton(**inputs, activation="relu")


@pytest.mark.skipif(ON_CUDA, reason="CPU-only message")
def test_cpu_tensors_without_interpreter_are_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        elementwise_recurrence_triton(**make_inputs())


def test_imports_without_triton():
    """`import sru.ops.triton` must work where triton is absent; calling it explains why not."""
    code = (
        "import sys; sys.modules['triton'] = None\n"
        "import torch\n"
        "from sru.ops.triton import elementwise_recurrence_triton as f\n"
        "try:\n"
        "    f(torch.zeros(1, 1, 3), torch.zeros(1, 1, 1), torch.zeros(2), torch.zeros(2),\n"
        "      None, 1)\n"
        "except RuntimeError as e:\n"
        "    assert 'needs the triton package' in str(e), e\n"
        "    print('ok')\n"
    )
    env = dict(os.environ, TRITON_INTERPRET="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=root, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.skipif(ON_CUDA, reason="on a GPU run scripts/check_gpu.py itself")
def test_check_gpu_script_dry_run(tmp_path):
    """The prepared GPU script runs end to end (small cases, interpreter) and reports."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, os.path.join(root, "scripts", "check_gpu.py"),
                          "--dry-run-cpu", "--out", str(tmp_path)], capture_output=True,
                         text=True, env=dict(os.environ, TRITON_INTERPRET="1"), timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "correctness: ALL OK" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "bandwidth.json").exists() and (tmp_path / "correctness.json").exists()
