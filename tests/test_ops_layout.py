"""The layer's internal layout (issue 43): one RecurrenceSpec validated once, the backend table,
the private paths of the old layout re-exported for one release with a DeprecationWarning, and
the stack plan invalidated by what it reads from the cells (no process-wide counter)."""
import importlib
import subprocess
import sys

import pytest
import torch

import sru
from sru.ops import backends, reference
from sru.ops.spec import Masks, RecurrenceSpec, check_padded, split_flat


def test_spec_normalises_and_refuses_once():
    spec = RecurrenceSpec(4, bidirectional=True, activation=1)
    assert (spec.activation, spec.dirs, spec.width, spec.use_tanh) == ("tanh", 2, 8, True)
    with pytest.raises(ValueError, match="hidden_size must be a positive int, received 0"):
        RecurrenceSpec(0)
    with pytest.raises(ValueError, match="activation must be 'none', 'tanh', 0 or 1"):
        RecurrenceSpec(4, activation="relu")
    with pytest.raises(Exception):  # frozen: a spec is not edited after validation
        spec.hidden_size = 3


def test_every_backend_module_has_both_entries():
    for name, module_name in backends.MODULES.items():
        if name == "triton":
            pytest.importorskip("triton")
        module = importlib.import_module(module_name)
        assert callable(module.padded) and callable(module.packed), name


def test_flat_split_gives_what_the_entries_take():
    U, x = torch.randn(3, 2, 12), torch.randn(3, 2, 4)
    wc, bias = torch.randn(8), torch.randn(8)
    args = split_flat(U, x, wc, bias, None, 4, scale_x=0.5, mask_pad=torch.zeros(3, 2))
    assert isinstance(args[5], Masks) and isinstance(args[6], RecurrenceSpec)
    h, c = reference.padded(*args)
    h_flat, c_flat = reference.elementwise_recurrence_reference(U, x, wc, bias, None, 4,
                                                                scale_x=0.5)
    torch.testing.assert_close((h, c), (h_flat, c_flat), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"mask_pad must have shape \(3, 2\)"):
        check_padded(U, x, wc, bias, None, Masks(None, torch.zeros(2, 3)), args[6])


@pytest.mark.slow  # a fresh interpreter per case (the warning fires on first import only)
@pytest.mark.parametrize("old, new, name", [
    ("sru.dispatch", "sru.ops.cpu.paths", "inference_plan"),
    ("sru.dispatch", "sru.checks", "check_cell_input"),
    ("sru.ops.autograd", "sru.ops.cpu.autograd", "recurrence_fwd"),
])
@pytest.mark.slow  # starts a fresh interpreter: a warning fires once per process
def test_old_private_paths_warn_and_reexport(old, new, name):
    code = (f"import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            f"import {new}\n"
            f"try:\n    import {old}\nexcept DeprecationWarning as e:\n    print('warned', e)\n"
            f"warnings.simplefilter('ignore')\nimport {old} as o, {new} as n\n"
            f"print(getattr(o, {name!r}) is getattr(n, {name!r}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "warned" in out.stdout and new.split(".")[1] in out.stdout, out.stdout
    assert out.stdout.strip().endswith("True")


def test_old_cpu_entry_keeps_its_flat_signature():
    with pytest.warns(DeprecationWarning):
        old = importlib.reload(importlib.import_module("sru.ops.autograd"))
    if "cpu" not in sru.ops.available_backends():
        pytest.skip("no CPU kernel")
    U, x = torch.randn(3, 2, 12, dtype=torch.float64), torch.randn(3, 2, 4, dtype=torch.float64)
    wc, bias = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    got = old.elementwise_recurrence_cpu(U, x, wc, bias, None, 4, False, True, 1.0, "none",
                                         None, None)
    want = reference.elementwise_recurrence_reference(U, x, wc, bias, None, 4)
    torch.testing.assert_close(got, want)


def test_no_module_level_generation_counter():
    import sru.ops.cpu.stack as stack

    assert not hasattr(stack, "GENERATION")
    assert "__setattr__" not in vars(sru.SRUCell) and "__setattr__" not in vars(sru.SRUppCell)


def test_stack_plan_follows_the_cells_not_a_global():
    if "cpu" not in sru.ops.available_backends():
        pytest.skip("no CPU kernel")
    a, b = sru.SRU(8, 8).eval(), sru.SRU(8, 8).eval()
    x = torch.randn(3, 2, 8)
    with torch.no_grad():
        a(x), b(x)
        plan_a = a._stack_plan
        b.rnn_lst[0].dropout = 0.3  # another stack's change leaves a's plan alone
        b(x)
        a(x)
        assert a._stack_plan is plan_a
        a.rnn_lst[1].highway_bias = 1.0  # not read by the plan: no rebuild
        a(x)
        assert a._stack_plan is plan_a
        a.train().eval()  # a mode switch and back: the same key, the same plan
        a(x)
        assert a._stack_plan is plan_a
        a.rnn_lst[0].rescale = not a.rnn_lst[0].rescale  # the skip scale changes: rebuilt
        a(x)
        assert a._stack_plan is not plan_a
