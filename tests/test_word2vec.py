"""Offline word2vec: the tool writes standard word2vec binary files that the classifier's loader reads."""
import numpy as np
import pytest

from tasks.common.tokenize import tokenize
from tasks.common.vectors import load_vectors
from tasks.common.word2vec import (OFFLINE_NAME, Word2VecSettings, cache_dir, coverage, imdb_texts,
                                   offline_vectors_path, train_word2vec)

TINY = ["The film was great , and the cast was great too .",
        "A dull film : the plot was dull and the cast was bored .",
        "Great acting ; a great , moving story that doesn't drag ."] * 20
TINY_SETTINGS = Word2VecSettings(dim=12, window=2, min_count=2, epochs=2, corpora=("ptb",))


def test_tool_writes_a_binary_file_the_loader_reads_back(tmp_path):
    sentences = [tokenize(s) for s in TINY]
    path = train_word2vec(sentences, tmp_path / "tiny.bin", TINY_SETTINGS, workers=1)
    vectors = load_vectors(str(path))
    counts = {}
    for s in sentences:
        for w in s:
            counts[w] = counts.get(w, 0) + 1
    assert set(vectors) == {w for w, c in counts.items() if c >= TINY_SETTINGS.min_count}
    assert "n't" in vectors and "does" in vectors  # the classifier's tokenisation, not whitespace split
    assert all(v.shape == (12,) and v.dtype == np.float32 and np.isfinite(v).all() for v in vectors.values())
    assert coverage(["great", "film", "zebra"], vectors) == pytest.approx(2 / 3)
    # the same file read for a chosen vocabulary (what the classification task does)
    some = load_vectors(str(path), wanted={"great", "zebra"})
    assert list(some) == ["great"] and np.array_equal(some["great"], vectors["great"])


def test_offline_name_resolves_to_the_cached_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SRU_CACHE_DIR", str(tmp_path))
    # put a tiny file where the default settings' cache entry lives: the loader must read it, not retrain
    default = cache_dir() / f"offline_w2v_300d_{Word2VecSettings().key()}.bin"
    assert str(default).startswith(str(tmp_path))
    train_word2vec([tokenize(s) for s in TINY], default, TINY_SETTINGS, workers=1)
    vectors = load_vectors(OFFLINE_NAME, wanted={"great", "plot"})
    assert set(vectors) == {"great", "plot"} and vectors["great"].shape == (12,)


def test_offline_vectors_are_trained_once_then_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SRU_CACHE_DIR", str(tmp_path))
    # real PTB training text, few dims and a high min_count so it takes seconds
    settings = Word2VecSettings(dim=8, window=2, min_count=200, epochs=1, corpora=("ptb",))
    path = offline_vectors_path(settings, workers=1, verbose=False)
    stamp = path.stat().st_mtime_ns
    vectors = load_vectors(str(path))
    assert 500 < len(vectors) < 10_000 and "the" in vectors and "unk" not in vectors  # <unk> dropped
    assert offline_vectors_path(settings, verbose=False) == path and path.stat().st_mtime_ns == stamp
    other = Word2VecSettings(dim=8, window=3, min_count=200, epochs=1, corpora=("ptb",))
    assert other.key() != settings.key()  # a change of setting never returns stale vectors


def test_imdb_corpus_is_not_the_mr_evaluation_data():
    from tasks.classification.sources import load_movie_reviews
    mr = {r.text for rows in load_movie_reviews("rotten_tomatoes").values() for r in rows}
    texts = list(imdb_texts())
    assert len(texts) == 25_000 and not mr.intersection(texts)
    assert not any("<br" in t for t in texts[:500])  # HTML line breaks removed before tokenising


def test_paper_cells_use_the_paper_regime_from_one_shared_base():
    from pathlib import Path

    from conftest import ROOT, compose
    cells = sorted(p.stem for p in (ROOT / "conf/experiment/paper").glob("classification_*.yaml"))
    assert len(cells) == 30
    for exp in cells:
        cfg = compose([f"experiment=paper/{exp}"])
        emb = cfg.task.embedding
        assert (emb.path, emb.fixed, emb.normalize, emb.dim) == (OFFLINE_NAME, True, True, 300), exp
        assert cfg.trainer.max_epochs == 100 and cfg.trainer.optimizer.lr == 0.001, exp
        layers = 8 if exp.endswith("8layers") else 4 if exp.endswith("4layers") else 2
        assert cfg.model.name == "cnn" or cfg.model.num_layers == layers, exp
        text = Path(ROOT / "conf/experiment/paper" / f"{exp}.yaml").read_text()
        assert "/experiment/paper/classification/_" in text and "optimizer" not in text, exp  # no copies
    assert compose(["task=classification"]).task.embedding.path == OFFLINE_NAME
