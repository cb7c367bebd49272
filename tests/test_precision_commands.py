"""predict.py / evaluate.py ``precision=fp32|bf16|int8`` (tasks/engine/inference/precision.py, issue 54): int8 on
every task's tiny run gives results of the right shape (speech: tests/test_speech_e2e.py), translation's int8 hypotheses stay close to
fp32's, evaluate reports the fp32 metric beside with compare=fp32, and a precision that cannot run
gets one line."""
import json

import pytest
import torch

from conftest import LM_FIXTURE, ROOT, tiny_lm_overrides
from test_classification_e2e import tiny_classification_overrides
from test_squad_e2e import tiny_squad_overrides
from test_translation_e2e import tiny_translation_overrides
from tasks.engine.inference.evaluate_cmd import evaluate_run
from tasks.engine.inference.loader import InferenceInputError
from tasks.engine.inference.precision import check_precision
from tasks.engine.inference.predict_cmd import load_predictor

pytestmark = pytest.mark.usefixtures("int8_kernels_on_tiny_products")  # else the tiny models' products run fp32


def test_bad_precision_gets_one_line():
    with pytest.raises(InferenceInputError, match=r"precision=fp64: expected one of \['fp32', 'bf16', 'int8'\]"):
        check_precision("fp64", torch.device("cpu"))
    with pytest.raises(InferenceInputError, match="precision=int8 runs on CPU only.*device=cpu"):
        check_precision("int8", torch.device("cuda"))
    assert check_precision(None, torch.device("cpu")) is None


def _shape_of(results):
    return [sorted(r) if isinstance(r, dict) else type(r).__name__ for r in results]


@pytest.mark.slow
def test_lm_int8_bf16_predict_and_compare(run_train, tmp_path):
    run_dir = tmp_path / "run"
    run_train(tiny_lm_overrides(steps=8), run_dir)
    lines = (LM_FIXTURE / "test.txt").read_text().splitlines()[:3]
    fp32 = load_predictor(run_dir, mode="score").predict(lines)
    for precision in ("int8", "bf16"):
        got = load_predictor(run_dir, mode="score", precision=precision).predict(lines)
        assert _shape_of(got) == _shape_of(fp32)
        assert [r["tokens"] for r in got] == [r["tokens"] for r in fp32]
        for a, b in zip(got, fp32):
            assert a["logprob"] == pytest.approx(b["logprob"], rel=0.05)
    metrics = evaluate_run([f"run={run_dir}", "precision=int8", "compare=fp32", f"out_dir={tmp_path / 'e'}"])
    assert metrics["compare_fp32"]["ppl"] == pytest.approx(metrics["ppl"], rel=0.05)
    assert metrics["compare_fp32"]["ppl"] != metrics["ppl"]  # really two precisions


@pytest.mark.slow
@pytest.mark.parametrize("task", ["classification", "squad"])
def test_int8_predict_shapes(run_train, tmp_path, task):
    overrides = (tiny_classification_overrides("sru", epochs=1) if task == "classification"
                 else tiny_squad_overrides("sru", steps=4))
    run_dir = tmp_path / "run"
    run_train(overrides, run_dir)
    if task == "classification":
        inputs = ["a fine film", "dull and slow"]
        fp32 = load_predictor(run_dir).predict(inputs)
        int8 = load_predictor(run_dir, precision="int8").predict(inputs)
        assert _shape_of(int8) == _shape_of(fp32)
    metrics = evaluate_run([f"run={run_dir}", "precision=int8", "compare=fp32", f"out_dir={tmp_path / 'e'}"])
    assert set(metrics["compare_fp32"]) == set(metrics) - {"compare_fp32"}


@pytest.mark.slow
def test_translation_int8_hypotheses_close_to_fp32(run_train, tmp_path):
    from sacrebleu.metrics import BLEU
    run_dir = tmp_path / "run"
    run_train(tiny_translation_overrides("transformer_sru", tmp_path / "cache", steps=80), run_dir)
    from tasks.translation.data import SAMPLE_PAIRS
    pairs = SAMPLE_PAIRS.read_text().splitlines()
    sources = [json.loads(line)["en"] for line in pairs]
    fp32 = load_predictor(run_dir).predict(sources)
    predictor = load_predictor(run_dir, precision="int8")
    int8 = predictor.predict(sources)
    # every layer int8, the 4,000-way output layer too (per-token activation scales keep its BLEU)
    assert predictor.task.int8_keep_fp32 == ()
    assert {predictor.model.output.precision, predictor.model.decoder[0].self_attn.q.precision} == {"int8"}
    assert len(int8) == len(fp32) and sum(len(h.split()) for h in fp32) >= len(fp32)  # real sentences
    assert BLEU().corpus_score(list(int8), [list(fp32)]).score >= 90
    # bench.precision.predict --product-share: each precision's profiled call, its products' seconds and share
    from bench.precision.predict import product_shares
    table = product_shares({"fp32": load_predictor(run_dir), "int8": predictor}, sources[:8]).splitlines()
    rows = {line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]] for line in table[2:]}
    assert set(rows) == {"fp32", "int8"}
    for seconds, products, share, _ in rows.values():
        assert 0 < float(products) < float(seconds) and 0 < float(share.rstrip(" %")) < 100
    assert rows["fp32"][3].endswith("×") and float(rows["fp32"][3].rstrip("×")) > 1 and rows["int8"][3] == "–"
