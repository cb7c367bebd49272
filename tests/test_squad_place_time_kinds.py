"""The kinds of issue 70's second pass (tasks/squad/answer_kinds.py): "where" -> a place, also a proper noun after
"in / from" that the tagger called an organisation; "when" -> a date that names a point in time, the asked
boundary of a range, an event after "during"; "who" -> a person, organisation or group the question does not
name; "which treaty / poem / mission" -> the name that holds or stands by the noun. The where / when questions
decode with their own prior (task.where_when_prior); the model's features never change."""
from __future__ import annotations

import pytest
import torch

from tasks.squad.answer_kinds import asks_place_or_time, kind_tokens
from tasks.squad.data import tokenize
from tasks.squad.tagger import NER_LABELS, POS_LABELS


def tagged(rows):
    """[(word, entity type, part of speech)] -> (words, (L, 2) tags)."""
    words = [w for w, _, _ in rows]
    tags = torch.tensor([[NER_LABELS.index(t), POS_LABELS.index(p)] for _, t, p in rows], dtype=torch.uint8)
    return words, tags


def marked(question, rows):
    words, tags = tagged(rows)
    tokens = kind_tokens(tokenize(question)[0], words, tags)
    return None if tokens is None else " ".join(words[k] for k in sorted(tokens))


# "Galileo was an Italian astronomer born in Pisa in 1564 ." (the tagger's own mistakes: Pisa ORG, 1564 CARDINAL)
GALILEO = [("Galileo", "PRODUCT", "PROPN"), ("was", "", "AUX"), ("an", "", "DET"), ("Italian", "NORP", "ADJ"),
           ("astronomer", "", "NOUN"), ("born", "", "VERB"), ("in", "", "ADP"), ("Pisa", "ORG", "PROPN"),
           ("in", "", "ADP"), ("1564", "CARDINAL", "NUM"), (".", "", "PUNCT")]
# "The war lasted from 1618 to 1648 , his final years , during the Second World War ."
WAR = [("The", "", "DET"), ("war", "", "NOUN"), ("lasted", "", "VERB"), ("from", "", "ADP"), ("1618", "DATE", "NUM"),
       ("to", "DATE", "ADP"), ("1648", "DATE", "NUM"), (",", "", "PUNCT"), ("his", "DATE", "PRON"),
       ("final", "DATE", "ADJ"), ("years", "DATE", "NOUN"), (",", "", "PUNCT"), ("during", "", "ADP"),
       ("the", "", "DET"), ("Second", "EVENT", "PROPN"), ("World", "EVENT", "PROPN"), ("War", "EVENT", "PROPN"),
       (".", "", "PUNCT")]


def test_where_lifts_a_proper_noun_after_in_that_the_tagger_called_an_organisation():
    assert marked("Where was Galileo born?", GALILEO) == "Pisa"
    assert marked("Who was Galileo?", GALILEO) == "Italian Pisa"  # people, groups, organisations (as tagged)


@pytest.mark.parametrize("question, dates", [
    ("When was the war?", "1618 1648 the Second World War"),   # points in time: not "his final years"
    ("When did the war end?", "1648 the Second World War"),    # the end of "from 1618 to 1648"
    ("When did the war begin?", "1618 the Second World War"),  # its start
    ("In what year did the war end?", "1648 the Second World War"),
])
def test_when_lifts_dates_that_name_a_point_in_time_and_the_asked_boundary(question, dates):
    words = marked(question, WAR).replace("the Second", "Second")
    assert words == dates.replace("the Second", "Second")


def test_a_hyphen_splits_a_range_of_years_but_not_a_duration():
    rows = [("in", "", "ADP"), ("1939", "DATE", "NUM"), ("-", "DATE", "PUNCT"), ("1945", "DATE", "NUM"),
            ("a", "", "DET"), ("10", "DATE", "NUM"), ("-", "DATE", "PUNCT"), ("day", "DATE", "NOUN"),
            ("festival", "", "NOUN")]
    assert marked("When did it end?", rows) == "1945"
    assert marked("When did it start?", rows) == "1939"


def test_what_the_question_names_is_not_its_answer():
    rows = [("Beethoven", "PERSON", "PROPN"), ("set", "", "VERB"), ("Schiller", "PERSON", "PROPN"),
            ("'s", "", "PART"), ("poem", "", "NOUN"), ("in", "", "ADP"), ("Vienna", "GPE", "PROPN"), ("in", "", "ADP"),
            ("1824", "DATE", "NUM")]
    assert marked("Whose poem did Beethoven set to music?", rows) == "Schiller"
    assert marked("Where did Beethoven set the poem in 1824?", rows) == "Vienna"
    assert marked("When did Beethoven set the poem in Vienna?", rows) == "1824"
    assert marked("When did Beethoven set the poem in 1824?", rows) is None  # only the named date: no kind


def test_works_and_events_are_the_names_that_hold_or_stand_by_their_kind():
    rows = [("The", "", "DET"), ("Treaty", "LAW", "PROPN"), ("of", "LAW", "ADP"), ("Versailles", "LAW", "PROPN"),
            ("ended", "", "VERB"), ("the", "", "DET"), ("war", "", "NOUN"), ("and", "", "CCONJ"), ("the", "", "DET"),
            ("Apollo", "", "PROPN"), ("11", "", "NUM"), ("mission", "", "NOUN"), ("and", "", "CCONJ"),
            ("the", "", "DET"), ("poem", "", "NOUN"), ("Ode", "WORK_OF_ART", "PROPN"), ("to", "WORK_OF_ART", "ADP"),
            ("Joy", "WORK_OF_ART", "PROPN"), ("in", "", "ADP"), ("1969", "DATE", "NUM")]
    assert marked("Which treaty ended the war?", rows) == "Treaty of Versailles"
    assert marked("Which poem is it?", rows) == "Ode to Joy"
    assert marked("Which mission was it?", rows) == "Apollo 11"  # the proper nouns beside the kind, untagged
    assert marked("Which painting is it?", rows) is None  # no name of the kind: the type column decides


def test_only_where_and_when_questions_take_their_own_prior():
    assert asks_place_or_time(tokenize("Where was Galileo born?")[0])
    assert asks_place_or_time(tokenize("In which year did the war end?")[0])
    assert not asks_place_or_time(tokenize("Who was Galileo?")[0])
    assert not asks_place_or_time(tokenize("In which city is the tower?")[0])  # its kind, with the usual prior


def test_a_where_question_decodes_with_its_prior_in_the_task():
    """End to end through the task's decoding: a reader that prefers the first sentence's description still
    answers "Where ...?" with the place when where_when_prior outweighs it, and not with the usual prior."""
    from tasks.squad.metrics import decode_spans
    words, tags = tagged(GALILEO)
    tokens = kind_tokens(tokenize("Where was Galileo born?")[0], words, tags)
    mask = torch.zeros(1, len(words), dtype=torch.bool)
    mask[0, sorted(tokens)] = True
    start = torch.full((1, len(words)), -10.0)
    end = torch.full((1, len(words)), -10.0)
    start[0, 3], end[0, 4], start[0, 7], end[0, 7] = 5.0, 5.0, -1.0, -1.0  # "Italian astronomer" far ahead
    pad = torch.zeros(1, len(words), dtype=torch.bool)
    spans = [tuple(int(x) for x in decode_spans(start, end, pad, 15, None, mask, torch.tensor([p])))
             for p in (4.0, 12.0)]
    assert spans == [(3, 4), (7, 7)]


@pytest.mark.parametrize("kinds, where_when, expected", [("true", 12.0, "Pisa"), ("true", 4.0, "Italian astronomer"),
                                                         ("false", 12.0, "Italian astronomer")])
def test_the_task_gives_where_questions_their_prior_only_with_answer_kinds(kinds, where_when, expected):
    """The real tagger on a real paragraph (spaCy calls Pisa an organisation), the task's own decoding."""
    from conftest import compose

    from tasks.common.text import PAD, UNK, Vocabulary
    from tasks.engine.base import build_task
    from tasks.squad.data import SquadExample
    from tasks.squad.features import collate, encode_split
    text = "Galileo Galilei was an Italian astronomer born in Pisa in 1564."
    ex = SquadExample("q1", "", text, "Where was Galileo born?", ["Pisa"], [text.index("Pisa")])
    enc = encode_split([ex], tagger="spacy_en_md", type_match=True)[0]
    enc = enc.with_ids(Vocabulary(sorted(set(enc.context_words + enc.question_words)), (PAD, UNK)))
    task = build_task(compose(["task=squad", f"task.answer_kinds={kinds}", f"task.where_when_prior={where_when}"]))
    batch = collate([enc], [0], 0, kinds == "true")
    words = [text[s:e] for s, e in enc.spans]
    start, end = torch.full((1, len(words)), -10.0), torch.full((1, len(words)), -10.0)
    start[0, words.index("Italian")], end[0, words.index("astronomer")] = 5.0, 5.0  # the reader's description
    start[0, words.index("Pisa")], end[0, words.index("Pisa")] = -1.0, -1.0
    s, e = (int(x) for x in task._decode(start, end, batch))
    assert text[enc.spans[s][0]:enc.spans[e][1]] == expected
