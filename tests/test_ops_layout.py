"""The layer's internal layout (issue 43): one RecurrenceSpec validated once, the backend table (the
one list of backends, issue 52), and the stack plan invalidated by what it reads from the cells (no
process-wide counter)."""
import importlib
import typing

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
    for name, entry in backends.TABLE.items():
        module = importlib.import_module(entry.module)  # each imports without its optional package
        assert callable(module.padded) and callable(module.packed), name
        if entry.paths is not None:
            paths = importlib.import_module(entry.paths)
            for function in ("inference_plan", "run_inference_path", "fuse_layer", "linear_recurrence",
                             "stack_plan", "run_stack"):
                assert callable(getattr(paths, function)), f"{name}: {entry.paths}.{function}"


def test_the_table_is_the_only_list_of_backend_names(monkeypatch):
    """A backend added as one table entry is a choice everywhere: sru.SRU, the model schema, the tests,
    and ``auto`` / explicit dispatch (a module that is only in the table runs, no KeyError)."""
    import sys
    import types

    from sru import testing
    from tasks.common.model_schemas import SRUConfig

    assert sru.ops.BACKENDS == ("auto", *backends.TABLE)
    assert typing.get_args(typing.get_type_hints(SRUConfig)["backend"]) == sru.ops.BACKENDS
    assert set(testing.FUSED_BACKENDS) == set(backends.TABLE) - {"reference"}

    fake = types.ModuleType("fake_backend")
    fake.padded = reference.padded
    fake.packed = reference.packed
    monkeypatch.setitem(sys.modules, "fake_backend", fake)
    monkeypatch.setitem(backends.TABLE, "fake", backends.Backend("fake_backend", "cpu", lambda: True, lambda: None))
    monkeypatch.setattr(backends, "BACKENDS", ("auto", *backends.TABLE))
    monkeypatch.setattr(backends, "_LOADED", dict(backends._LOADED))
    U, x = torch.randn(3, 2, 12, dtype=torch.float64), torch.randn(3, 2, 4, dtype=torch.float64)
    wc, bias = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)
    assert backends.resolve("fake", U) is fake
    want = reference.elementwise_recurrence_reference(U, x, wc, bias, None, 4)
    got = sru.ops.elementwise_recurrence(U, x, wc, bias, None, 4, backend="fake")
    torch.testing.assert_close(got, want)


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
