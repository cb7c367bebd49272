"""The reader's tagger features (tasks/squad/tagger.py): spaCy's entity type and part of speech land on the
reader's own tokens by character offset, the per-split cache gives back the same tags, the features widen
the reader's input, and a model saved without tagger features still loads and answers."""
from __future__ import annotations

import torch

from tasks.squad.data import SquadExample, tokenize
from tasks.squad.features import NUM_FEATURES, collate, encode_split, num_features
from tasks.squad.tagger import NER_LABELS, NUM_TAG_FEATURES, POS_LABELS, one_hot_tags, paragraph_tags

TEXT = "Johann Sebastian Bach was a German composer. He was born in Eisenach in 1685."


def tags_by_token(text):
    tokens, spans = tokenize(text)
    tags = paragraph_tags([text], [spans])[0]
    return {tok: (NER_LABELS[int(n)], POS_LABELS[int(p)]) for tok, (n, p) in zip(tokens, tags)}


def test_entity_types_and_parts_of_speech_on_reader_tokens():
    tags = tags_by_token(TEXT)
    assert tags["Bach"] == ("PERSON", "PROPN")
    assert tags["German"][0] == "NORP"
    assert tags["Eisenach"][0] == "GPE"
    assert tags["1685"][0] == "DATE"
    assert tags["composer"] == ("", "NOUN")
    assert tags["born"][1] == "VERB"
    assert tags["."] == ("", "PUNCT")


def test_a_reader_token_spacy_splits_takes_its_first_piece():
    # the reader keeps "Berners-Lee" whole; spaCy splits it: the tags of "Berners" apply
    tags = tags_by_token("Tim Berners-Lee invented the Web.")
    assert tags["Berners-Lee"][0] == "PERSON"


def test_cache_gives_back_the_same_tags(tmp_path):
    _, spans = tokenize(TEXT)
    first = paragraph_tags([TEXT], [spans], cache=tmp_path)
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and files[0].suffix == ".pt"
    again = paragraph_tags([TEXT], [spans], cache=tmp_path)
    assert torch.equal(first[0], again[0])


def test_features_widen_by_the_one_hot_tags():
    ex = SquadExample("q1", "", TEXT, "Where was Bach born?", ["Eisenach"], [TEXT.index("Eisenach")])
    plain = encode_split([ex])[0]
    tagged = encode_split([ex], tagger="spacy_en_md")[0]
    assert plain.tags is None and tagged.tags.shape == (len(tagged.spans), 2)
    assert num_features(None) == NUM_FEATURES and num_features("spacy_en_md") == NUM_FEATURES + NUM_TAG_FEATURES
    one_hot = one_hot_tags(tagged.tags)
    assert one_hot.shape == (len(tagged.spans), NUM_TAG_FEATURES)
    assert (one_hot.sum(1) <= 2).all() and (one_hot.sum(1) >= 1).all()  # one POS each, an entity type or none
    from tasks.common.text import PAD, UNK, Vocabulary
    vocab = Vocabulary(sorted(set(tagged.context_words + tagged.question_words)), (PAD, UNK))
    batch = collate([tagged.with_ids(vocab), plain.with_ids(vocab)][:1], [0], vocab.pad_id)
    assert batch["features"].shape[-1] == NUM_FEATURES + NUM_TAG_FEATURES


def test_a_model_saved_before_the_tagger_features_keeps_word_features_only():
    """Its inference state has no "tagger" key: the task answers with the 6 word features it was trained on,
    whatever task.tagger says now; a new model records its tagger; a bad tagger name is refused."""
    import pytest
    from conftest import compose
    from tasks.common.text import PAD, UNK, Vocabulary
    from tasks.engine.base import build_task
    task = build_task(compose(["task=squad"]))
    assert task.tagger == "spacy_en_md"
    task.restore_inference_state({"vocab": Vocabulary(["bach"], (PAD, UNK)).state_dict(), "fixed_rows_from": None})
    assert task.tagger is None and task.encoder_input_size() == 2 * 128 + NUM_FEATURES
    task.tagger = "spacy_en_md"
    assert task.inference_state()["tagger"] == "spacy_en_md"
    with pytest.raises(ValueError, match="task.tagger"):
        build_task(compose(["task=squad", "task.tagger=nltk"])).check_config()
