"""The layer's Python API and its TorchScript route against every bad input a new-user probe tried, as a
table (the fast tier): each row is the exact call and the exact one-line ValueError it must raise, at
construction (or at scripting) rather than at the first forward. docs/failures.md lists every row
(``test_docs_failures_lists_every_row``); the deploy routes' rows (export, AOTInductor, C++) are in
tests/test_bad_inputs_deploy.py (slow tier: they compile).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, List

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from sru import SRU, SRUCell, SRUpp, quantize_dynamic, to_precision


@dataclass
class Row:
    id: str
    call: Callable[[], Any]
    message: str


class Tagger(nn.Module):
    """A model with a layer and a head, as quantize_dynamic's callers have."""

    def __init__(self):
        super().__init__()
        self.rnn = SRU(8, 8)
        self.decoder = nn.Linear(8, 4)


ROWS: List[Row] = [
    Row("sru-negative-projection", lambda: SRU(8, 8, projection_size=-3),
        "SRU expected projection_size to be an int >= 0 (0 = none), got -3"),
    Row("sru-bidirectional-string", lambda: SRU(8, 8, bidirectional="no"),
        "SRU expected bidirectional to be True or False, got 'no'"),
    Row("sru-batch-first-string", lambda: SRU(8, 8, batch_first="yes"),
        "SRU expected batch_first to be True or False, got 'yes'"),
    Row("sru-dropout-string", lambda: SRU(8, 8, dropout="0.1"), "SRU expected dropout in [0, 1), got '0.1'"),
    Row("sru-float-hidden-size", lambda: SRU(8, 8.0), "SRU expected hidden_size to be a positive int, got 8.0"),
    Row("sru-fractional-layers", lambda: SRU(8, 8, num_layers=2.5),
        "SRU expected num_layers to be a positive int, got 2.5"),
    Row("sru-infinite-highway-bias", lambda: SRU(8, 8, highway_bias=float("inf")),
        "SRU expected highway_bias to be a finite number, got inf"),
    Row("sru-custom-m-function", lambda: SRU(8, 8, custom_m=torch.tanh),
        "SRU expected custom_m to be None or an nn.Module or a list of them (one per layer), got "
        "builtin_function_or_method"),
    Row("cell-negative-projection", lambda: SRUCell(8, 8, n_proj=-1),
        "SRUCell expected n_proj to be an int >= 0 (0 = none), got -1"),
    Row("cell-use-tanh-string", lambda: SRUCell(8, 8, use_tanh="true"),
        "SRUCell expected use_tanh to be True or False, got 'true'"),
    Row("cell-weight-c-init-string", lambda: SRUCell(8, 8, weight_c_init="big"),
        "SRUCell expected weight_c_init to be a finite number, got 'big'"),
    Row("srupp-zero-input-size", lambda: SRUpp(0, 8, 4), "SRUpp expected input_size to be a positive int, got 0"),
    Row("srupp-bidirectional-string", lambda: SRUpp(8, 8, 4, bidirectional="no"),
        "SRUpp expected bidirectional to be True or False, got 'no'"),
    Row("srupp-rescale-two", lambda: SRUpp(8, 8, 4, rescale=2), "SRUpp expected rescale to be True or False, got 2"),
    Row("srupp-highway-bias-none", lambda: SRUpp(8, 8, 4, highway_bias=None),
        "SRUpp expected highway_bias to be a finite number, got None"),
    Row("quantize-keep-fp32-unknown-name", lambda: quantize_dynamic(Tagger(), keep_fp32="decodr"),
        "quantize_dynamic: keep_fp32 names 'decodr', which is no submodule of this Tagger; give names from "
        "model.named_modules() (rnn, rnn.rnn_lst, rnn.rnn_lst.0, rnn.rnn_lst.1, decoder)"),
    Row("quantize-keep-fp32-not-a-name", lambda: quantize_dynamic(Tagger(), keep_fp32=["decoder", 3]),
        "quantize_dynamic: keep_fp32 names 3, which is no submodule of this Tagger; give names from "
        "model.named_modules() (rnn, rnn.rnn_lst, rnn.rnn_lst.0, rnn.rnn_lst.1, decoder)"),
    Row("weight-c-init-negative", lambda: SRU(8, 4, weight_c_init=-1),
        "SRU expected weight_c_init to be a finite number >= 0, got -1"),
    Row("cell-weight-c-init-negative", lambda: SRUCell(8, 4, weight_c_init=-0.5),
        "SRUCell expected weight_c_init to be a finite number >= 0, got -0.5"),
    Row("quantize-not-a-module", lambda: quantize_dynamic("model.pt"),
        "quantize_dynamic expected an nn.Module, got str"),
    Row("quantize-keep-fp32-an-int", lambda: quantize_dynamic(Tagger(), keep_fp32=5),
        "quantize_dynamic: keep_fp32 expected a submodule name or a list of them, got int"),
    Row("quantize-inplace-a-string", lambda: quantize_dynamic(Tagger(), inplace="no"),
        "quantize_dynamic expected inplace to be True or False, got 'no'"),
    Row("to-precision-unknown", lambda: to_precision(Tagger(), "fp8"),
        "to_precision=fp8: expected one of ['fp32', 'bf16', 'int8']"),
    Row("cell-precision-int8", lambda: setattr(SRUCell(8, 8), "precision", "int8"),
        "SRUCell.precision=int8: int8 weights come from sru.quantize_dynamic(model) or sru.to_precision(model, "
        "'int8'), not from setting the attribute"),
    Row("script-custom-m", lambda: torch.jit.script(SRU(6, 6, custom_m=nn.Linear(6, 18))),
        "SRUCell with custom_m cannot be scripted (torch.jit.script): custom_m's signature is free-form; export "
        "the model with sru.deploy.export instead (docs/deploy.md)"),
]

# TorchScript raises a torch.jit.Error whose last line is the message (its own traceback above it).
SCRIPTED: List[Row] = [
    Row("scripted-wrong-width", lambda: torch.jit.script(SRU(8, 4).eval())(torch.randn(3, 2, 100)),
        "SRU expected input of shape (length, batch, 8), got [3, 2, 100]"),
    Row("scripted-2d-input", lambda: torch.jit.script(SRU(8, 4).eval())(torch.randn(3, 8)),
        "SRU expected input of shape (length, batch, 8), got [3, 8]"),
    Row("scripted-float64", lambda: torch.jit.script(SRU(8, 4).eval())(torch.randn(3, 2, 8, dtype=torch.float64)),
        "SRUCell expected input of the parameters' dtype torch.float32, got torch.float64; convert the input or "
        "the module"),
    Row("scripted-meta-device", lambda: torch.jit.script(SRU(8, 4).eval())(torch.empty(3, 2, 8, device="meta")),
        "SRUCell expected input on the parameters' device cpu, got meta; move the input or the module"),
    Row("scripted-srupp-wrong-width", lambda: torch.jit.script(SRUpp(8, 8, 4).eval())(torch.randn(3, 2, 5)),
        "SRUpp expected input of shape (length, batch, 8), got [3, 2, 5]"),
    # TorchScript's own argument check refused these before the forward ran (a PackedSequence reaches a
    # scripted module as a plain tuple): sru/scripting/cells.py, PackedAsTuple
    Row("scripted-packed-sequence", lambda: torch.jit.script(SRU(8, 4).eval())(_packed()),
        "SRU under torch.jit.script takes a padded tensor with mask_pad, not a PackedSequence"),
    Row("scripted-packed-unsorted", lambda: torch.jit.script(SRU(8, 4).eval())(_packed(enforce_sorted=False)),
        "SRU under torch.jit.script takes a padded tensor with mask_pad, not a PackedSequence"),
    Row("scripted-srupp-packed-sequence", lambda: torch.jit.script(SRUpp(8, 8, 4).eval())(_packed()),
        "SRUpp under torch.jit.script takes a padded tensor with mask_pad, not a PackedSequence"),
]


def _packed(enforce_sorted: bool = True):
    lengths = torch.tensor([5, 3]) if enforce_sorted else torch.tensor([3, 5])
    return pack_padded_sequence(torch.randn(5, 2, 8), lengths, enforce_sorted=enforce_sorted)


def test_a_saved_and_loaded_scripted_module_refuses_a_packed_sequence_alike(tmp_path):
    torch.jit.save(torch.jit.script(SRU(8, 4).eval()), str(tmp_path / "sru.pt"))
    with pytest.raises(torch.jit.Error) as err:
        torch.jit.load(str(tmp_path / "sru.pt"))(_packed())
    assert str(err.value).strip().splitlines()[-1] == (
        "builtins.ValueError: SRU under torch.jit.script takes a padded tensor with mask_pad, not a PackedSequence")


def test_a_scripted_module_still_runs_padded_input():
    model = SRU(8, 4).eval()
    x = torch.randn(5, 2, 8)
    with torch.no_grad():
        torch.testing.assert_close(torch.jit.script(model)(x)[0], model(x)[0], atol=1e-5, rtol=1e-5)


def test_the_table_covers_the_probe():
    rows = ROWS + SCRIPTED
    assert len(rows) >= 20 and len({r.id for r in rows}) == len(rows)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_argument_gives_its_one_line(row):
    with pytest.raises(ValueError) as err:
        row.call()
    assert str(err.value) == row.message


@pytest.mark.parametrize("row", SCRIPTED, ids=[r.id for r in SCRIPTED])
def test_scripted_module_names_the_expected_input(row):
    with pytest.raises(torch.jit.Error) as err:
        row.call()
    assert str(err.value).strip().splitlines()[-1] == f"builtins.ValueError: {row.message}"


def test_docs_failures_lists_every_row():
    docs = (Path(__file__).parents[1] / "docs" / "failures.md").read_text()
    missing = [r.id for r in ROWS + SCRIPTED if r.message not in docs]
    assert not missing, f"add these rows to docs/failures.md: {missing}"
