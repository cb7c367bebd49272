"""Span edges at names (tasks/squad/span_edges.py): a decoded span that cuts a tagged name is widened to the
name's edges, never across a sentence end nor past max_len; a span at no name is kept."""
from __future__ import annotations

import torch

from tasks.squad.span_edges import entity_edges
from tasks.squad.tagger import NER_LABELS

# "It is named after the astronomer Edwin Hubble . Queen Isabella I paid ."
WORDS = [("It", ""), ("is", ""), ("named", ""), ("after", ""), ("the", ""), ("astronomer", ""), ("Edwin", "PERSON"),
         ("Hubble", "PERSON"), (".", ""), ("Queen", ""), ("Isabella", "PERSON"), ("I", "PERSON"), ("paid", ""),
         (".", "")]
TAGS = torch.tensor([[NER_LABELS.index(t), 0] for _, t in WORDS], dtype=torch.uint8)
ENDS = [w == "." for w, _ in WORDS]


def text(span):
    return " ".join(w for w, _ in WORDS[span[0]:span[1] + 1])


def test_a_span_inside_a_name_reaches_its_edges():
    assert text(entity_edges(TAGS, 6, 6, ENDS)) == "Edwin Hubble"
    assert text(entity_edges(TAGS, 7, 7, ENDS)) == "Edwin Hubble"
    assert text(entity_edges(TAGS, 9, 10, ENDS)) == "Queen Isabella I"  # the title kept, the name completed


def test_spans_at_no_name_and_whole_names_are_kept():
    assert entity_edges(TAGS, 4, 5, ENDS) == (4, 5)
    assert entity_edges(TAGS, 6, 7, ENDS) == (6, 7)
    assert entity_edges(None, 6, 6, ENDS) == (6, 6)  # no tagger: as decoded


def test_the_widening_stops_at_a_sentence_end_and_at_max_len():
    run = torch.tensor([[NER_LABELS.index("DATE"), 0]] * 6, dtype=torch.uint8)
    assert entity_edges(run, 3, 3, [False, True, False, False, False, False]) == (2, 5)
    assert entity_edges(run, 3, 3, [False] * 6, max_len=4) == (3, 3)  # widening would pass max_len: kept


def test_a_how_many_answer_ends_before_the_noun_the_question_gives():
    from tasks.squad.data import tokenize
    from tasks.squad.span_edges import without_asked_noun
    context = ["It", "stood", "for", "28", "years", "and", "had", "one", "gate", "."]
    assert without_asked_noun(tokenize("For how many years did it stand?")[0], context, 3, 4) == (3, 3)
    assert without_asked_noun(tokenize("How many gates did it have?")[0], context, 7, 8) == (7, 7)  # singular too
    assert without_asked_noun(tokenize("How long did it stand?")[0], context, 3, 4) == (3, 4)
    assert without_asked_noun(tokenize("How many years?")[0], context, 4, 4) == (4, 4)  # never empty


def test_the_task_widens_decoded_spans_only_with_the_switch():
    from conftest import compose

    from tasks.common.text import PAD, UNK, Vocabulary
    from tasks.engine.base import build_task
    from tasks.squad.data import SquadExample
    from tasks.squad.features import collate, encode_split
    text = "The telescope is named after the astronomer Edwin Hubble. It was launched in 1990."
    ex = SquadExample("q1", "", text, "Who is the telescope named after?", ["Edwin Hubble"], [text.index("Edwin")])
    enc = encode_split([ex], tagger="spacy_en_md", type_match=True)[0]
    enc = enc.with_ids(Vocabulary(sorted(set(enc.context_words)), (PAD, UNK)))
    batch = collate([enc], [0], 0)
    edwin = [text[s:e] for s, e in enc.spans].index("Edwin")
    for switch, expected in (("true", "Edwin Hubble"), ("false", "Edwin")):
        task = build_task(compose(["task=squad", f"task.span_edges={switch}"]))
        s, e = task._edges(enc, batch, 0, edwin, edwin)
        assert text[enc.spans[s][0]:enc.spans[e][1]] == expected


def _tagged(rows):
    from tasks.squad.tagger import POS_LABELS
    return [w for w, _, _ in rows], torch.tensor([[NER_LABELS.index(t), POS_LABELS.index(p)] for _, t, p in rows],
                                                 dtype=torch.uint8)


def test_an_age_or_a_measure_loses_its_relation_head_only_for_the_question_that_asks_it():
    from tasks.squad.data import tokenize
    from tasks.squad.span_edges import without_relation_head
    context = ["He", "moved", "at", "the", "age", "of", "21", "a", "distance", "of", "3", "kilometres", "."]
    assert without_relation_head(tokenize("How old was he when he moved?")[0], context, 3, 6) == (6, 6)
    assert without_relation_head(tokenize("At what age did he move?")[0], context, 3, 6) == (6, 6)
    assert without_relation_head(tokenize("How far did he move?")[0], context, 7, 11) == (10, 11)
    assert without_relation_head(tokenize("When did he move?")[0], context, 3, 6) == (3, 6)  # not asked: kept
    assert without_relation_head(tokenize("How old was he?")[0], context, 4, 5) == (4, 5)  # nothing after "of"


def test_a_clause_run_on_past_the_noun_phrase_is_cut():
    from tasks.squad.span_edges import without_run_on
    words, tags = _tagged([("The", "", "DET"), ("Gutenberg", "WORK_OF_ART", "PROPN"), ("Bible", "WORK_OF_ART", "PROPN"),
                           (",", "", "PUNCT"), ("printed", "", "VERB"), ("in", "", "ADP"), ("the", "DATE", "DET"),
                           ("1450s", "DATE", "NUM"), ("a", "", "DET"), ("mould", "", "NOUN"), ("called", "", "VERB"),
                           ("Penicillium", "PERSON", "PROPN"), ("had", "", "AUX"), ("the", "", "DET"),
                           ("figure", "", "NOUN"), ("whose", "", "DET"), ("works", "", "NOUN")])

    def cut(start, end):
        start, end = without_run_on(words, tags, start, end)
        return " ".join(words[start:end + 1])
    assert cut(0, 7) == "The Gutenberg Bible"               # ", printed in ..." runs on
    assert cut(10, 12) == "Penicillium"                     # no naming participle, no auxiliary at the end
    assert cut(13, 16) == "the figure"                      # a relative clause
    assert cut(1, 2) == "Gutenberg Bible" and cut(11, 11) == "Penicillium"   # a noun phrase is kept
    assert without_run_on(words, None, 0, 7) == (0, 7)      # no tagger: as decoded
