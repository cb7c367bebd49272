"""Tiny end-to-end speech runs on 6 clips synthesised here with espeak-ng (the real feature pipeline, the
real trainer): transcripts are written and jiwer on them gives the WER the run reports."""
from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from tasks.corpora.speech_synthesis import synthesise_voice

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("sox") is None,
                                reason="espeak-ng and sox are needed to synthesise the test clips "
                                       "(apt-get install -y espeak-ng sox)")]
TEXTS = ["one two", "three four five", "six", "seven eight", "nine zero one", "two two"]


@pytest.fixture(scope="module")
def manifests(tmp_path_factory):
    root = tmp_path_factory.mktemp("speech_clips")
    clips = [{"id": f"c{i}", "text": text, "engine": "espeak", "voice": voice, "tempo": tempo, "pitch_cents": 0,
              "espeak_speed": 170, "espeak_pitch": 50}
             for i, (text, voice, tempo) in enumerate(zip(TEXTS, ["en-us", "en-gb"] * 3, [1.0, 1.1, 0.9] * 2))]
    (root / "wav").mkdir()
    synthesise_voice(clips, root / "wav", tick=lambda: None)
    rows = [{"id": c["id"], "audio": f"wav/{c['id']}.wav", "text": c["text"], "voice": f"espeak:{c['voice']}"}
            for c in clips]
    paths = {}
    for split, part in (("train", rows[:4]), ("valid", rows[4:]), ("test", rows[3:])):
        paths[split] = root / f"{split}.jsonl"
        paths[split].write_text("".join(json.dumps(r) + "\n" for r in part))
    return paths


def speech_run_overrides(manifests, model, cache, extra=()):
    return ["task=speech", f"model={model}", "task.data.source=manifest", f"task.data.cache_dir={cache}",
            *(f"task.data.manifests.{s}={p}" for s, p in manifests.items()),
            "model.hidden_size=16", "model.num_layers=1", "task.batch_size=2", "task.max_frames=1000",
            "trainer.max_epochs=null", "trainer.max_steps=4", "trainer.eval_every_steps=2",
            "trainer.optimizer.lr=0.01", "trainer.progress_bar=false", "trainer.plot=false",
            "trainer.num_threads=1", "logger=csv", "seed=0", *extra]


@pytest.mark.parametrize("model,decoding", [("sru", ["task.decoder=greedy"]),
                                            ("lstm", ["task.decoder=beam", "task.lm_order=3"])])
def test_tiny_speech_run_writes_transcripts_scored_like_jiwer(manifests, model, decoding, run_train, tmp_path):
    jiwer = pytest.importorskip("jiwer")
    summary = run_train(speech_run_overrides(manifests, model, tmp_path / "cache", [*decoding, "task.beam_size=3"]),
                        tmp_path / "run")
    test = summary["test"]
    assert summary["steps"] == 4 and summary["monitor"] == "cer" and math.isfinite(test["loss"])
    rows = [json.loads(line) for line in (tmp_path / "run" / "transcripts_test.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["c3", "c4", "c5"]
    assert {r["reference"] for r in rows} == set(TEXTS[3:])
    refs, hyps = [r["reference"] for r in rows], [r["hypothesis"] for r in rows]
    assert test["wer"] == pytest.approx(100 * jiwer.wer(refs, hyps))  # jiwer accepts empty hypotheses
    assert test["cer"] == pytest.approx(100 * jiwer.cer(refs, hyps))
    assert test["baseline_empty_wer"] == 100.0
    # the beam + LM decoder also reports the greedy (no LM) rates of the same test split
    assert ("greedy_wer" in test and "greedy_cer" in test) == ("task.decoder=beam" in decoding)
    assert (tmp_path / "run" / "transcripts_valid.jsonl").is_file()
    assert json.loads((tmp_path / "run" / "results.json").read_text())["test"]["wer"] == test["wer"]
    assert any((tmp_path / "cache" / "features").glob("*.pt"))  # features cached for the next run
    # the trainer flushes subnormal floats to zero (trainer.flush_denormal; their backward pass is ~6x slower
    # on x86); conftest undoes it
    assert (torch.tensor([1e-30]) * torch.tensor([1e-10])).item() == 0.0


def test_resumed_speech_run_matches_uninterrupted(manifests, run_train, tmp_path):
    """SpecAugment masks and batch order are functions of (seed, epoch, batch): a resume changes nothing."""
    from tasks.engine.run_metrics import read_metrics
    def overrides(steps, extra=()):
        return [o for o in speech_run_overrides(manifests, "sru", tmp_path / "cache", ["trainer.log_every_steps=1",
                                                                           "task.batch_size=1", *extra])
                if not o.startswith(("trainer.max_steps", "trainer.eval_every_steps"))] + [
            f"trainer.max_steps={steps}", "trainer.eval_every_steps=3"]

    run_train(overrides(6), tmp_path / "full")
    run_train(overrides(3), tmp_path / "part")
    run_train(overrides(6, [f"resume={tmp_path / 'part'}"]), tmp_path / "part")
    full = [r["loss"] for r in read_metrics(tmp_path / "full", "train")]
    resumed = [r["loss"] for r in read_metrics(tmp_path / "part", "train")]
    assert len(full) == 6 and resumed[-3:] == pytest.approx(full[-3:], rel=1e-5)


def test_lm_tuning_script_decodes_a_finished_run(manifests, run_train, tmp_path, capsys):
    """python -m tasks.speech.lm_tuning on a tiny run: greedy, the plain beam and one LM setting, scored on valid."""
    from conftest import compose

    from tasks.speech import lm_tuning as tune
    from omegaconf import OmegaConf
    overrides = speech_run_overrides(manifests, "sru", tmp_path / "cache")
    run_train(overrides, tmp_path / "run")
    (tmp_path / "run" / ".hydra").mkdir()  # train.py's Hydra writes it; the in-process runner does not
    OmegaConf.save(compose(overrides), tmp_path / "run" / ".hydra" / "config.yaml")
    tune.main([str(tmp_path / "run"), "--orders", "2", "--weights", "0.5", "--bonuses", "1", "--beam", "3"])
    out = capsys.readouterr().out
    assert "valid: 2 utterances; greedy WER" in out and "beam 3, no LM: WER" in out
    assert "| 2 | 0.5 | 1 |" in out
    with pytest.raises(SystemExit, match="2"):
        tune.main([str(tmp_path / "nowhere")])
    assert "no such file or directory" in capsys.readouterr().err



@pytest.mark.slow
@pytest.mark.usefixtures("int8_kernels_on_tiny_products")
def test_int8_and_bf16_predict_on_a_tiny_speech_run(manifests, run_train, tmp_path):
    """predict.py / evaluate.py precision= on speech (issue 54): transcripts of the right shape, and the fp32
    metric beside with compare=fp32."""
    from tasks.engine.inference.evaluate_cmd import evaluate_run
    from tasks.engine.inference.predict_cmd import load_predictor
    run_dir = tmp_path / "run"
    run_train(speech_run_overrides(manifests, "sru", tmp_path / "cache", ["task.decoder=greedy"]), run_dir)
    wavs = [str(manifests["test"].parent / "wav" / f"c{i}.wav") for i in (3, 4)]
    predictor = load_predictor(run_dir)
    fp32 = predictor.predict([predictor.task.parse_input(w) for w in wavs])
    for precision in ("int8", "bf16"):
        predictor = load_predictor(run_dir, precision=precision)
        got = predictor.predict([predictor.task.parse_input(w) for w in wavs])
        assert [sorted(r) for r in got] == [sorted(r) for r in fp32]
    metrics = evaluate_run([f"run={run_dir}", "precision=int8", "compare=fp32", f"out_dir={tmp_path / 'e'}"])
    assert set(metrics["compare_fp32"]) == set(metrics) - {"compare_fp32"} and "cer" in metrics
