"""bench.task_throughput (python -m bench.task_throughput) on tiny fixtures of every task: both models of the task's pair train on the same
batches, the report has items/s, the SRU/baseline ratio and a step-time breakdown that adds up, with the
encoder parts on the modules the two models differ in. No timing assertions."""
from __future__ import annotations

import json
import shutil

import pytest

from bench import task_throughput as bench_tasks
from conftest import LM_FIXTURE, ROOT, compose

TINY = ["task.data.source=files", f"task.data.train_file={LM_FIXTURE / 'train.txt'}",
        f"task.data.valid_file={LM_FIXTURE / 'valid.txt'}", f"task.data.test_file={LM_FIXTURE / 'test.txt'}",
        "task.batch_size=4", "task.bptt=8", "model.hidden_size=16", "model.num_layers=2"]
SQUAD = ROOT / "tests" / "fixtures" / "squad" / "tiny-v1.1.json"
TRANSLATION = ROOT / "tasks" / "translation" / "sample_pairs.jsonl"


def run_bench(tmp_path, task, overrides, steps=2):
    argv = ["--tasks", task, "--steps", str(steps), "--rounds", "2", "--threads", "1", "--out", str(tmp_path)]
    for override in overrides:
        argv += ["--override", override]
    [result] = bench_tasks.main(argv)
    assert result["task"] == task and result["ratio_over_baseline"] > 0 and len(result["ratio_rounds"]) == 2
    assert (result["candidate"], result["baseline"]) == bench_tasks.model_pair(task)
    for model in (result["candidate"], result["baseline"]):
        r = result["models"][model]
        assert len(r["items_per_s_rounds"]) == 2 and r["items_per_s"] > 0
        parts = r["ms_per_step_parts"]
        assert set(parts) == set(bench_tasks.PARTS)
        assert parts["rest_fwd"] > 0 and parts["rest_bwd"] > 0 and parts["optimizer"] > 0
        assert r["ms_per_step"] == pytest.approx(sum(parts.values()))
    saved = json.loads((tmp_path / "bench_tasks.json").read_text())
    assert saved["results"][0]["task"] == task
    table = (tmp_path / "bench_tasks.md").read_text()
    assert "SRU / baseline" in table
    assert all(f"| {task} | {m} |" in table for m in (result["candidate"], result["baseline"]))
    return result


def encoder_parts(result, model):
    parts = result["models"][model]["ms_per_step_parts"]
    return parts["encoder_fwd"], parts["encoder_bwd"]


def test_lm_sru_vs_lstm_report(tmp_path):
    result = run_bench(tmp_path, "lm", TINY)
    assert result["items"] == "ntokens" and (result["candidate"], result["baseline"]) == ("sru", "lstm")
    for model in ("sru", "lstm"):
        assert min(encoder_parts(result, model)) > 0


def test_squad_times_both_reader_encoders(tmp_path):
    overrides = ["task.data.source=files", *(f"task.data.files.{s}={SQUAD}" for s in ("train", "valid", "test")),
                 "task.encoder.hidden_size=8", "task.encoder.num_layers=1", "task.embedding.dim=8",
                 "task.embedding.path=null", "task.batch_size=2"]
    result = run_bench(tmp_path, "squad", overrides)
    assert result["items"] == "nsentences"
    for model in ("sru", "lstm"):
        assert min(encoder_parts(result, model)) > 0


def test_translation_compares_transformer_sru_with_transformer(tmp_path):
    overrides = ["task.data.source=files", f"task.data.cache_dir={tmp_path / 'cache'}",
                 *(f"task.data.files.{s}={TRANSLATION}" for s in ("train", "valid", "test")),
                 "task.subwords.vocab_size=320", "task.max_tokens=64", "task.max_sentences=2",
                 "model.d_model=16", "model.attention_heads=2", "model.ffn_dim=32", "model.encoder_layers=1",
                 "model.decoder_layers=1", "model.max_positions=128"]
    result = run_bench(tmp_path, "translation", overrides)
    assert result["items"] == "ntokens"
    assert min(encoder_parts(result, "transformer_sru")) > 0  # its SRU sublayers
    assert encoder_parts(result, "transformer") == (0.0, 0.0)  # has none: everything is the rest


@pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("sox") is None,
                    reason="espeak-ng and sox synthesise the test clips (apt-get install -y espeak-ng sox)")
def test_speech_sru_vs_lstm_report(tmp_path):
    from tasks.corpora.speech_synthesis import synthesise_voice

    texts = ["one two", "three four five", "six", "seven eight"]
    clips = [{"id": f"c{i}", "text": t, "engine": "espeak", "voice": "en-us", "tempo": 1.0, "pitch_cents": 0,
              "espeak_speed": 170, "espeak_pitch": 50} for i, t in enumerate(texts)]
    (tmp_path / "wav").mkdir()
    synthesise_voice(clips, tmp_path / "wav", tick=lambda: None)
    manifest = tmp_path / "clips.jsonl"
    manifest.write_text("".join(json.dumps({"id": c["id"], "audio": f"wav/{c['id']}.wav", "text": c["text"],
                                            "voice": "espeak:en-us"}) + "\n" for c in clips))
    overrides = ["task.data.source=manifest", f"task.data.cache_dir={tmp_path / 'cache'}",
                 *(f"task.data.manifests.{s}={manifest}" for s in ("train", "valid", "test")),
                 "model.hidden_size=8", "model.num_layers=1", "task.batch_size=2", "task.max_frames=1000"]
    result = run_bench(tmp_path, "speech", overrides)
    assert result["items"] == "nframes"
    for model in ("sru", "lstm"):
        assert min(encoder_parts(result, model)) > 0


def test_translation_encoder_is_the_sru_of_each_sublayer():
    from sru import SRU
    from tasks.common.encoders import recurrent_modules
    from tasks.translation.model import Seq2SeqTransformer

    for model, expected in (("transformer_sru", 2 + 3), ("transformer", 0)):
        cfg = compose(["task=translation", f"model={model}", "model.encoder_layers=2", "model.decoder_layers=3",
                       "model.d_model=8", "model.attention_heads=2", "model.ffn_dim=8"])
        modules = recurrent_modules(Seq2SeqTransformer(20, 0, cfg["model"]))
        assert len(modules) == expected and all(isinstance(m, SRU) for m in modules)


def test_backward_spans_overlapping_count_once():
    from torch import nn

    clock = bench_tasks.StepClock(nn.Linear(2, 2))
    clock._bwd = {0: [1.0, 3.0], 1: [2.0, 4.0], 2: [5.0, 6.0], 3: [5.5, 5.8]}
    clock.backward_done(10.0)
    assert clock.totals["encoder_bwd"] == pytest.approx(4.0) and clock.totals["rest_bwd"] == pytest.approx(6.0)


def test_unknown_task_is_one_clear_error():
    with pytest.raises(ValueError, match="expected task configs from"):
        bench_tasks.overrides_for("nope", "sru", [])
    assert bench_tasks.overrides_for("ptb-paper", "lstm", []) == ["experiment=paper/ptb_lstm"]


def test_every_task_config_has_a_model_pair():
    assert {"lm", "lm_char", "classification", "squad", "translation", "speech"} <= set(bench_tasks.task_configs())
    assert bench_tasks.overrides_for("lm_char", "sru", ["seed=1"]) == ["task=lm_char", "model=sru", "seed=1"]
    assert bench_tasks.model_pair("translation") == ("transformer_sru", "transformer")
    for task in ("lm", "lm_char", "classification", "squad", "speech", "ptb-paper"):
        assert bench_tasks.model_pair(task) == ("sru", "lstm")
