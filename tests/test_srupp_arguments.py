"""SRUpp refuses bad constructor arguments and mismatched input dtypes up front, with one
ValueError naming the fix (issue 44), instead of a ZeroDivisionError or a matmul dtype error."""
import pytest
import torch

from sru import SRUpp, SRUppCell


@pytest.mark.parametrize("kwargs, match", [
    (dict(proj_size=0), "proj_size"),
    (dict(proj_size=-4), "proj_size"),
    (dict(attention_every_n_layers=0), "attention_every_n_layers >= 1"),
    (dict(num_heads=3), "num_heads to be a positive int dividing proj_size=8"),
    (dict(num_heads=0), "num_heads"),
    (dict(dropout=1.0), r"dropout in \[0, 1\)"),
    (dict(dropout=-0.1), r"dropout in \[0, 1\)"),
    (dict(attn_dropout=1.5), r"attn_dropout in \[0, 1\)"),
    (dict(attention_last_n_layers=3), r"attention_last_n_layers in \[0, num_layers=2\]"),
    (dict(attention_last_n_layers=-2), "attention_last_n_layers"),
    (dict(num_layers=0), "num_layers"),
])
def test_constructor_refuses_bad_arguments(kwargs, match):
    args = dict(input_size=8, hidden_size=16, proj_size=8)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        SRUpp(**args)


@pytest.mark.parametrize("kwargs", [dict(attention_last_n_layers=0),
                                    dict(attention_last_n_layers=2),
                                    dict(attention_every_n_layers=3),
                                    dict(num_heads=4, attn_dropout=0.5)])
def test_constructor_accepts_the_edges(kwargs):
    model = SRUpp(8, 16, 8, **kwargs)
    h, c, _ = model(torch.randn(3, 2, 8))
    assert h.shape == (3, 2, 16) and c.shape == (2, 2, 16)


@pytest.mark.parametrize("proj_input_to_hidden_first", [False, True])
def test_half_input_to_a_float_model_is_refused_clearly(proj_input_to_hidden_first):
    model = SRUpp(8, 16, 8, proj_input_to_hidden_first=proj_input_to_hidden_first)
    with pytest.raises(ValueError, match=r"SRUpp expected input of dtype torch.float32 .* "
                                         r"got torch.float16; convert"):
        model(torch.randn(3, 2, 8, dtype=torch.float16))


def test_half_input_to_a_float_cell_is_refused_clearly():
    cell = SRUppCell(8, 8, transform_module=None)
    with pytest.raises(ValueError, match="SRUppCell expected input of dtype torch.float32"):
        cell(torch.randn(3, 2, 8, dtype=torch.float16))


def test_autocast_is_still_allowed():
    model = SRUpp(8, 16, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h, _, _ = model(torch.randn(3, 2, 8, dtype=torch.bfloat16))
    assert h.shape == (3, 2, 16)


@pytest.mark.parametrize("shape", [(0, 2, 8), (3, 0, 8)])
def test_empty_input_gives_empty_outputs_as_sru_does(shape):
    model, c0 = SRUpp(8, 4, 4, num_layers=2, bidirectional=True), torch.randn(2, shape[1], 8)
    h, c, memory = model(torch.randn(*shape), c0)
    assert h.shape == (*shape[:2], 8) and torch.equal(c, c0)  # no step: c0 unchanged
    assert [t.shape[:2] for t in memory["saved_inputs"]] == [shape[:2]] * 2
    h, c, _ = model(torch.randn(*shape, requires_grad=True))
    (h.sum() + c.sum()).backward()  # attached to the graph, as SRU's empty outputs
