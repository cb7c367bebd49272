"""The TorchScript copy of the recurrence (sru/scripting/cells.py ``scripted_recurrence``) against the same
specification cases every backend meets (``sru.testing.CASES``): forward and every input gradient, compiled
by ``torch.jit.script``, against the float64 reference.

TorchScript needs the copy (the eager layer's routes call the kernels through ctypes, which it cannot
compile); these cases keep it the same function. Per-step gate weights come only from ``custom_m``, which
TorchScript refuses (tests/test_deploy_torchscript.py), so those cases do not apply to it.
"""
import pytest
import torch

from sru.scripting.cells import scripted_recurrence
from sru.testing import CASES, TOLERANCE, case_inputs, compare_with_reference

SCRIPTED = torch.jit.script(scripted_recurrence)
APPLIES = [case for case, spec in CASES.items() if not spec.get("per_step")]


def scripted(U, x, weight_c, bias, c0, hidden_size, bidirectional=False, has_skip_term=True, scale_x=1.0,
             activation="none", mask_c=None, mask_pad=None):
    """``elementwise_recurrence``'s flat call on the compiled copy (its scale is a tensor, as the buffer)."""
    scale = torch.tensor([float(scale_x)], dtype=U.dtype)
    return SCRIPTED(U, x, weight_c, bias, c0, mask_c, mask_pad, hidden_size, 2 if bidirectional else 1,
                    has_skip_term, scale, activation in ("tanh", 1))


def test_every_case_but_per_step_weights_applies():
    assert len(APPLIES) == len(CASES) - 1 and "per-step-weights" not in APPLIES


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("case", APPLIES)
def test_scripted_recurrence_matches_reference(case, dtype):
    inputs, options = case_inputs(case, dtype=dtype)
    errors = compare_with_reference(scripted, inputs, **options)
    bad = {name: err for name, err in errors.items() if not err < TOLERANCE[dtype]}
    assert not bad, f"relative errors above {TOLERANCE[dtype]:g}: {bad}"


def test_a_wrong_copy_is_caught():
    """The comparison sees a one-term change in the copy's maths (here: the skip scale ignored)."""
    inputs, options = case_inputs("scale-x-bi-padded")

    def unscaled(**kwargs):
        return scripted(**{**kwargs, "scale_x": 1.0})
    errors = compare_with_reference(unscaled, inputs, **options)
    assert errors["h"] > 1e-3
