"""Every fused recurrence backend against the float64 reference loop (sru/testing.py).

Parametrised over ``sru.testing.FUSED_BACKENDS`` (the non-reference entries of
``sru.ops.BACKENDS``): ``cpu`` wherever its kernel builds, ``triton`` compiled on a GPU or, without
one, in Triton's CPU interpreter (TRITON_INTERPRET=1, small cases only). A backend that cannot
run here is skipped with the reason. Each comparison draws random upstream gradients for h and
c_last, so a wrong gradient of any input shows; errors are relative to the largest reference
magnitude. Backend-specific checks live in test_ops_cpu.py and test_ops_triton.py.
"""
import pytest
import torch

from sru import testing
from sru.testing import (CASES, GRADCHECK_CASES, TOLERANCE, backend_fn, case_inputs,
                             compare_with_reference, make_inputs)


@pytest.fixture(params=testing.FUSED_BACKENDS)
def backend(request):
    reason = testing.unavailable_reason(request.param)
    if reason:
        pytest.skip(reason)
    with testing.triton_interpreter(request.param):
        yield request.param


def assert_matches(errors, tol):
    bad = {name: err for name, err in errors.items() if not err < tol}
    assert not bad, f"relative errors above {tol:g}: {bad}"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_matches_reference(backend, case, dtype):
    if testing.interpreted(backend) and not CASES[case].get("interpreter", True):
        pytest.skip("too slow for Triton's interpreter; runs compiled on a GPU")
    inputs, options = case_inputs(case, dtype=dtype, device=testing.backend_device(backend))
    assert_matches(compare_with_reference(backend_fn(backend), inputs, **options),
                   TOLERANCE[dtype])


@pytest.mark.parametrize("params", ["params-low", "params-f32"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
def test_low_precision_computed_in_float32(backend, dtype, params):
    """Half-precision inputs: all of them, or only U and x (the matmul's output under
    autocast) with float32 parameters. State and arithmetic are float32, so the error is one
    final rounding: outputs in U's dtype, each gradient in its input's dtype."""
    inputs = make_inputs(L=6, B=4, d=5, bidirectional=True, dtype=dtype, c0=True, mask_c=True,
                         lengths=[6, 3, 1, 4], device=testing.backend_device(backend),
                         param_dtype=None if params == "params-low" else torch.float32)
    assert_matches(compare_with_reference(backend_fn(backend), inputs), TOLERANCE[dtype])


@pytest.mark.parametrize("case", list(GRADCHECK_CASES))
def test_gradcheck(backend, case):
    """Finite differences in float64, the dropout mask's gradient included."""
    spec = dict(GRADCHECK_CASES[case])
    options = spec.pop("options", {})
    inputs = make_inputs(**spec, device=testing.backend_device(backend))
    names = list(testing.leaves(inputs))
    fn = backend_fn(backend)

    def f(*tensors):
        return fn(**dict(inputs, **dict(zip(names, tensors))), **options)

    # The interpreter runs each program in Python: a random projection instead of every entry.
    assert torch.autograd.gradcheck(f, [inputs[n] for n in names],
                                    fast_mode=testing.interpreted(backend))


@pytest.mark.parametrize("used", ["h", "c_last"])
def test_only_one_output_used(backend, used):
    """The unused output's gradient arrives as None; it must count as zero."""
    inputs = make_inputs(bidirectional=True, c0=True, lengths=[5, 3, 2],
                         device=testing.backend_device(backend))
    names = ["U", "x", "weight_c", "bias", "c0"]
    grads = []
    for fn in (testing.reference, backend_fn(backend)):
        h, c = fn(**inputs)
        out = h if used == "h" else c
        weights = torch.linspace(-1, 1, out.shape[-1], dtype=out.dtype, device=out.device)
        found = torch.autograd.grad((out * weights).sum(), [inputs[n] for n in names],
                                    allow_unused=True)
        grads.append(found)
    for name, want, got in zip(names, *grads):
        assert testing.rel_err(got, want) < TOLERANCE[torch.float64], name


def test_non_contiguous_inputs(backend):
    """Same values in other memory layouts give the same results."""
    inputs = make_inputs(B=3, d=8, bidirectional=True, c0=True, mask_c=True, lengths=[5, 2, 4],
                         device=testing.backend_device(backend))
    strided = dict(inputs)
    for name in ("U", "x"):  # batch-first in memory, then viewed time-first
        strided[name] = inputs[name].detach().transpose(0, 1).contiguous().transpose(0, 1)
        strided[name].requires_grad_(True)
        assert not strided[name].is_contiguous()
    strided["c0"] = inputs["c0"].detach().t().contiguous().t().requires_grad_(True)
    strided["mask_pad"] = inputs["mask_pad"].t().contiguous().t()
    fn = backend_fn(backend)
    grad_h, grad_c = testing.upstream_grads(inputs)
    want = testing.forward_backward(fn, inputs, grad_h, grad_c)
    got = testing.forward_backward(fn, strided, grad_h, grad_c)
    for name in want:
        assert testing.rel_err(got[name], want[name]) < TOLERANCE[torch.float64], name


def test_padded_steps_are_inert(backend):
    """On padding h is exactly 0, and no gradient reaches U or x there."""
    inputs = make_inputs(L=6, B=3, d=3, bidirectional=True, dtype=torch.float32,
                         lengths=[6, 2, 4], device=testing.backend_device(backend))
    grad_h, grad_c = testing.upstream_grads(inputs)
    got = testing.forward_backward(backend_fn(backend), inputs, grad_h, grad_c)
    pad = inputs["mask_pad"]
    assert (got["h"][pad] == 0).all()
    assert (got["grad_U"][pad] == 0).all() and (got["grad_x"][pad] == 0).all()


def test_backward_is_deterministic(backend):
    """weight_c/bias gradients are reduced without atomics: two runs give the same bits."""
    inputs = make_inputs(L=7, B=4, d=9, bidirectional=True, dtype=torch.float32,
                         mask_c=True, lengths="random", device=testing.backend_device(backend))
    grad_h, grad_c = testing.upstream_grads(inputs)
    first = testing.forward_backward(backend_fn(backend), inputs, grad_h, grad_c)
    second = testing.forward_backward(backend_fn(backend), inputs, grad_h, grad_c)
    for name in first:
        assert torch.equal(first[name], second[name]), name
