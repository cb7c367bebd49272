"""Triton-backend specifics: a tensor scale_x, inference without the c history, autocast and
amp_recurrence_fp16, the custom ops' registration (opcheck, torch.compile), compiling both
kernels for sm_90, its input errors, and working without triton or a GPU.

Fused-vs-reference correctness (every option, awkward sizes, gradcheck, bf16/fp16, padding,
determinism) is in tests/test_ops_backends.py, shared with the CPU kernel. On a CUDA machine
the kernels run compiled on the GPU; without one, on CPU tensors in Triton's interpreter
(TRITON_INTERPRET=1, set below for this module only). Without triton the module is skipped.
"""
import json
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed: the Triton backend is untested")

from sru import testing  # noqa: E402
from sru.ops.reference import elementwise_recurrence_reference  # noqa: E402
from sru.ops.triton import elementwise_recurrence_triton  # noqa: E402

ON_CUDA = torch.cuda.is_available()
DEVICE = "cuda" if ON_CUDA else "cpu"


@pytest.fixture(autouse=True, scope="module")
def triton_mode():
    """Interpret the kernels on CPU when there is no GPU; restore the environment afterwards."""
    with testing.triton_interpreter():
        yield


def make_inputs(d=4, c0=True, **options):
    """The shared builder (sru/testing.py) on this module's device, with c0 by default."""
    return testing.make_inputs(d=d, c0=c0, device=DEVICE, **options)


def test_scale_x_tensor_is_read_on_device():
    inputs = make_inputs(bidirectional=True)
    scale = torch.tensor(1.3, dtype=torch.float64, device=DEVICE)
    h, _ = elementwise_recurrence_triton(**inputs, scale_x=scale)
    h_ref, _ = elementwise_recurrence_reference(**inputs, scale_x=1.3)
    torch.testing.assert_close(h, h_ref, rtol=1e-12, atol=1e-12)


def test_inference_skips_the_history():
    """Without autograd the forward writes no c history, and h, c_last are unchanged."""
    inputs = make_inputs(bidirectional=True, lengths="random", dtype=torch.float32)
    h_train, c_train = elementwise_recurrence_triton(**inputs)
    with torch.no_grad():
        h, c = elementwise_recurrence_triton(**inputs)
    assert torch.equal(h, h_train) and torch.equal(c, c_train)
    detached = {n: t.detach() if torch.is_tensor(t) else t for n, t in inputs.items()}
    from sru.ops.triton.padded import recurrence_forward
    args = [detached[n] for n in ("U", "x", "weight_c", "bias", "c0")]
    _, _, history = recurrence_forward(*args, None, None, None, 1.0, 4, 1, False,
                                                   False)
    assert history.numel() == 0


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
    got = testing.forward_backward(elementwise_recurrence_triton, inputs,
                                   torch.ones(5, 2, 8, dtype=torch.float64),
                                   torch.ones(2, 8, dtype=torch.float64), amp_recurrence_fp16=True)
    h = got["h"]
    assert h.dtype == torch.float16 and got["grad_weight_c"].dtype == torch.float32
    # The oracle sees the same fp16-rounded inputs.
    rounded = {n: (t.detach().half().double() if torch.is_tensor(t) and t.is_floating_point()
                   else t) for n, t in inputs.items()}
    h_ref, _ = elementwise_recurrence_reference(**rounded)
    assert testing.rel_err(h, h_ref) < 2e-3


def test_custom_op_registration():
    """Schema, fake (meta) impls and autograd registration agree with the real kernels, so
    torch.compile can trace through the op."""
    from sru.ops.triton.padded import recurrence_forward

    inputs = make_inputs(L=3, B=2, d=3, bidirectional=True, lengths="random", mask_c=True,
                         dtype=torch.float32)
    mask_pad = inputs["mask_pad"].to(torch.uint8)
    args = (inputs["U"], inputs["x"], inputs["weight_c"], inputs["bias"], inputs["c0"],
            inputs["mask_c"], mask_pad, None, 1.0, 3, 1, True, True)
    torch.library.opcheck(recurrence_forward, args,
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
    ("fp32", dict(K=3, SKIP=1, TANH=True, HAS_MASK_C=True, HAS_MASK_PAD=False,  # packed input
                  PER_STEP_W=False, SCALE_FROM_PTR=False, PACKED=True)),
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
    from sru.ops.triton.kernels import sru_backward_kernel, sru_forward_kernel

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
            elif name in ("BATCH_SIZES", "STEP_OFFSETS"):  # packed layout (sru/ops/triton/packed.py)
                sig[name] = "*i64"
            else:
                sig[name] = "*u8" if name == "MASK_PAD" else f"*{dtype if name in low else 'fp32'}"
        return sig

    target = GPUTarget("cuda", 90, 32)
    constexprs = dict(dict(PACKED=False), **variant, FP64=False, BLOCK=128)
    for kernel, extra in ((sru_forward_kernel, {}),
                          (sru_backward_kernel, dict(NEED_GRAD_MASK_C=True))):
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.skipif(ON_CUDA, reason="on a GPU run scripts/check_gpu.py itself")
def test_check_gpu_script_dry_run(tmp_path):
    """The prepared GPU script runs end to end (small cases, interpreter) and reports."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    # The script imports the installed sru; point it at this checkout's.
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, os.path.join(root, "scripts", "check_gpu.py"),
                          "--dry-run-cpu", "--out", str(tmp_path)], capture_output=True,
                         text=True, env=dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=path),
                         timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "correctness: ALL OK" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "bandwidth.json").exists()
    # Measured µs per step printed beside the bandwidth-bound prediction (sru/ops/triton/roofline.py).
    assert "µs/step inf (predicted)" in (tmp_path / "summary.md").read_text()
    row = json.loads((tmp_path / "bandwidth.json").read_text())["rows"][0]
    assert row["inference_predicted_us_per_step"] > 0 and row["inference_us_per_step"] > 0
    # Its own GPU-scale cases and the test suite's (sru.testing.CASES) both ran.
    cases = {r["case"] for r in json.loads((tmp_path / "correctness.json").read_text())["results"]}
    assert "no_skip" in cases and "tests:padded-bi-k4-dropout-tanh" in cases, cases
