"""Every Triton kernel variant the launchers can use, compiled to sm_80 and sm_90 cubins on
this machine (no GPU needed: triton ships ptxas), with registers and spills checked
(sru/ops/triton/compile_check.py, docs/gpu.md#compiled-variants). The fast tier compiles a
representative subset, one variant a test; the slow tier the whole matrix."""
import os

import pytest

pytest.importorskip("triton", reason="triton is not installed")

from sru.ops.triton.compile_check import (compile_all, compile_variant,  # noqa: E402
                                          unexpected_spills, variants)


@pytest.fixture(autouse=True)
def compiled_mode(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # real JITFunctions, not the interpreter's
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9's default, without its warning


def _check(row):
    """Compiled (ptxas reported its registers), and no spill but those known and listed."""
    assert row["registers"] > 0, row
    assert not unexpected_spills([row]), unexpected_spills([row])


@pytest.mark.parametrize("variant", variants(quick=True), ids=lambda v: v.name)
def test_representative_variant_compiles_without_spills(variant):
    _check(compile_variant(variant))


@pytest.mark.slow
def test_every_variant_compiles_without_spills():
    rows = compile_all(variants(), workers=min(2, os.cpu_count() or 1))
    assert len(rows) == len(variants())
    assert all(row["registers"] > 0 for row in rows)
    assert not unexpected_spills(rows), unexpected_spills(rows)
    assert {row["arch"] for row in rows} == {80, 90}
    assert {row["block"] for row in rows} == {32, 64, 128}
