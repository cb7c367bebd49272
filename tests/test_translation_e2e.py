"""Translation end to end on the hand-made dictionary fixture: the real pipeline (prepare, subwords,
train, validate with BLEU, test with beam search), its files, and sacreBLEU's command line on them."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from conftest import ROOT, compose

from tasks.engine.run_metrics import read_metrics
from tasks.translation.data import SAMPLE_PAIRS

FIX = ROOT / "tests" / "fixtures" / "translation"


def tiny_translation_overrides(model: str, cache_dir, steps: int = 80):
    """8 sentence pairs, train = valid = test: a memorisation check of the whole pipeline."""
    return [
        "task=translation", f"model={model}", "task.data.source=files", f"task.data.cache_dir={cache_dir}",
        *(f"task.data.files.{split}={SAMPLE_PAIRS}" for split in ("train", "valid", "test")),
        "task.subwords.vocab_size=320", "task.max_tokens=256", "task.max_sentences=8",
        "task.decoding.beam_size=3", "task.decoding.max_len_b=5",
        "model.d_model=32", "model.attention_heads=2", "model.ffn_dim=64", "model.encoder_layers=1",
        "model.decoder_layers=1", "model.dropout=0.0", "model.sru.rnn_dropout=0.0", "model.max_positions=128",
        "trainer.optimizer.lr=0.01", "trainer.scheduler.name=constant", "trainer.scheduler.warmup_steps=5",
        f"trainer.max_steps={steps}", "trainer.max_epochs=null", "trainer.max_minutes=null",
        "trainer.eval_every_steps=40", "trainer.log_every_steps=1", "trainer.progress_bar=false",
        "trainer.plot=false", "trainer.num_threads=1", "logger=csv", "seed=0",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("model", ["transformer", "transformer_sru"])
def test_tiny_translation_trains_and_sacrebleu_cli_agrees(model, run_train, tmp_path):
    run_dir = tmp_path / "run"
    summary = run_train(tiny_translation_overrides(model, tmp_path / "cache"), run_dir)
    losses = [r["loss"] for r in read_metrics(run_dir, "train")]
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0], losses
    valid = read_metrics(run_dir, "valid")
    assert len(valid) == 2 and all(0.0 <= r["bleu"] <= 100.0 + 1e-9 and 0.0 <= r["chrf"] <= 100.0 + 1e-9 for r in valid)
    assert summary["monitor"] == "bleu" and summary["best_valid"] == max(r["bleu"] for r in valid)
    test = summary["test"]
    assert test["bleu"] > 10.0, test  # memorised (train = test)
    hyp, ref = run_dir / "hyp_test.txt", run_dir / "ref_test.txt"
    assert len(hyp.read_text(encoding="utf-8").splitlines()) == len(ref.read_text(encoding="utf-8").splitlines()) == 8
    saved = json.loads((run_dir / "sacrebleu_test.json").read_text())
    assert saved["bleu"] == test["bleu"] and "tok:13a" in saved["signature"]["bleu"]
    assert (run_dir / "spm.model").is_file() and (run_dir / "hyp_valid.txt").is_file()
    # the judged check: sacreBLEU's own command line on the written files gives the same numbers
    out = subprocess.run([sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp), "-m", "bleu", "chrf",
                          "-w", "4"], capture_output=True, text=True, check=True).stdout
    cli_bleu, cli_chrf = json.loads(out)
    assert cli_bleu["signature"] == saved["signature"]["bleu"] and cli_chrf["signature"] == saved["signature"]["chrf"]
    assert cli_bleu["score"] == pytest.approx(test["bleu"], abs=1e-4)
    assert cli_chrf["score"] == pytest.approx(test["chrf"], abs=1e-4)


def test_task_refuses_a_shared_encoder_model_before_loading_data():
    from tasks.engine.base import build_task
    with pytest.raises(ValueError, match=r"model=sru: task=translation accepts model= one of \['transformer', 'transformer_sru'\]"):
        build_task(compose(["task=translation", "model=sru"])).check_config()


def test_default_config_is_english_to_german_transformer_sru():
    cfg = compose(["task=translation"])
    assert (cfg.task.src_lang, cfg.task.tgt_lang, cfg.task.data.source) == ("en", "de", "real")
    assert cfg.trainer.max_minutes is None and cfg.trainer.max_epochs  # a budget in epochs, not minutes
    assert cfg.model.name == "transformer_sru" and cfg.model.sru.mode == "before_ffn"
    assert compose(["task=translation", "model=transformer"]).model.sru.mode == "none"  # the plain baseline
    # cosine decay to 0 over the run's own budget (no fixed horizon): trainer.max_epochs=N rescales it
    assert cfg.trainer.scheduler.name == "cosine" and cfg.trainer.scheduler.total_steps is None
    assert compose(["task=translation", "model=transformer_sru"]).model.sru.mode != "none"


@pytest.mark.slow
def test_stop_and_resume_matches_uninterrupted_run(run_train, tmp_path):
    """8 steps straight vs 3, stop, resume to 8 (mid-epoch: 2 batches an epoch), dropout on: identical
    losses, and the resumed run checks the subword model saved in its checkpoint."""
    base = tiny_translation_overrides("transformer_sru", tmp_path / "cache", steps=8) + [
        "task.max_sentences=4", "model.dropout=0.1", "model.sru.rnn_dropout=0.1", "trainer.eval_every_steps=null",
        "test_after_training=false"]
    straight, split = tmp_path / "straight", tmp_path / "split"
    run_train(base, straight)
    run_train(base + ["trainer.max_steps=3"], split)
    run_train(base + [f"resume={split}"], split)
    losses = lambda run: [(r["step"], r["loss"]) for r in read_metrics(run, "train")]
    assert losses(split) == losses(straight) and len(losses(straight)) == 8


@pytest.mark.slow
def test_real_corpus_run_prints_per_source_scores_and_samples(run_train, tmp_path, capsys):
    """source=real on the package-format fixtures: per-source BLEU/chrF from the same summed statistics,
    the corpus files' paths and ten test samples printed, no test reference among the training targets."""
    real = FIX / "real"
    overrides = [o for o in tiny_translation_overrides("transformer", tmp_path / "cache", steps=20)
                 if "task.data.files" not in o and "task.data.source" not in o] + [
        "task.data.source=real", f"task.data.real.libreoffice_help={real / 'libreoffice'}",
        f"task.data.real.gnome_help={real / 'help'}", f"task.data.real.fillets_scripts={real / 'fillets'}",
        f"task.data.dictionary_path={FIX / 'de-en.ding'}", "task.data.real.dictionary_block_lines=4",
        "task.data.real.min_valid=1", "task.data.real.min_test=2", "task.data.real.max_pairs=null",
        "trainer.eval_every_steps=null", "task.subwords.vocab_size=400"]
    run_dir = tmp_path / "run"
    summary = run_train(overrides, run_dir)
    out = capsys.readouterr().out
    assert "real corpus files: " in out and "random test sentences" in out
    refs = (run_dir / "ref_test.txt").read_text(encoding="utf-8").splitlines()
    assert out.count("  SRC [") == min(10, len(refs)) and out.count("  HYP: ") == min(10, len(refs))
    test = summary["test"]
    for domain in ("libreoffice", "gnome", "fillets", "dictionary"):
        assert 0.0 <= test[f"bleu_{domain}"] <= 100.0 and f"test {domain}: BLEU" in out
    folder = next((tmp_path / "cache").glob("real-*"))
    train_targets = set((folder / "train.de").read_text(encoding="utf-8").splitlines())
    assert refs and not set(refs) & train_targets
