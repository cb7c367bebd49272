"""SQuAD data: the v1.1 loader on a hand-made fixture, character offsets, malformed files, and the
offline generator (markup stripping, valid SQuAD output, no article in two splits)."""
from __future__ import annotations

import copy
import json
import re

import pytest

from conftest import ROOT
from tasks.squad.data import SquadFormatError, char_to_token_span, load_squad_file, parse_squad, tokenize
from tasks.squad.features import encode_split
from tasks.squad.generator.offline_corpus import find_spans, generate, prepare_offline
from tasks.corpora.wiki_prose import split_sentences, strip_markup, wiki_articles

FIX = ROOT / "tests" / "fixtures" / "squad"
TINY = FIX / "tiny-v1.1.json"
WIKI = FIX / "wiki_sample.xml"


def test_loader_reads_the_v11_fixture():
    examples = {ex.qid: ex for ex in load_squad_file(TINY)}
    assert len(examples) == 7
    start = examples["q-start"]
    assert start.answer_starts == [0] and start.context.startswith("Zürich")           # answer at the start
    end = examples["q-end"]
    assert end.answer_starts[0] + len(end.answers[0]) == len(end.context)               # ... and at the end
    assert end.answers == ["the Limmat.", "Limmat"]                                      # several gold answers
    uni = examples["q-unicode"]
    assert uni.context[uni.answer_starts[0]:][:6] == "Ελλάδα"
    twice = examples["q-second-occurrence"]                                              # "Athens" x3
    assert twice.answer_starts[0] > twice.context.index("Athens")


def test_token_offsets_round_trip_and_answer_spans():
    text = "Zürich's 415,367 residents (Ελλάδα) self-governed, 109.5° — the end."
    tokens, spans = tokenize(text)
    assert [text[s:e] for s, e in spans] == tokens
    assert tokens[:3] == ["Zürich", "'s", "415,367"] and "self-governed" in tokens and "Ελλάδα" in tokens
    for ex in encode_split(load_squad_file(TINY)):
        a, s = ex.example.answers[0], ex.example.answer_starts[0]
        # the token span of the gold answer maps back to exactly the gold substring
        assert ex.example.context[ex.spans[ex.start][0]:ex.spans[ex.end][1]] == a
        assert ex.spans[ex.start][0] == s  # the occurrence at answer_start, not the first one
    assert char_to_token_span(spans, len(text) + 5, len(text) + 9) is None


def _broken(mutate):
    obj = json.loads(TINY.read_text(encoding="utf-8"))
    mutate(obj["data"][1]["paragraphs"][0]["qas"][1])  # question id "q-year"
    return obj


@pytest.mark.parametrize("mutate, message", [
    (lambda qa: qa.pop("answers"), r'missing or empty "answers"'),
    (lambda qa: qa.update(answers=[]), r'missing or empty "answers"'),
    (lambda qa: qa["answers"][0].update(answer_start=10_000), r"answer_start 10000 .* outside the context"),
    (lambda qa: qa["answers"][0].update(answer_start=-1), r"outside the context"),
    (lambda qa: qa["answers"][0].update(answer_start=3), r"answer text '1896' is not at answer_start 3"),
    (lambda qa: qa["answers"][0].update(answer_start="5"), r'no integer "answer_start"'),
])
def test_malformed_file_names_file_and_question_id(tmp_path, mutate, message):
    path = tmp_path / "broken-v1.1.json"
    path.write_text(json.dumps(_broken(mutate), ensure_ascii=False), encoding="utf-8")
    with pytest.raises(SquadFormatError, match=message) as err:
        load_squad_file(path)
    assert str(path) in str(err.value) and "'q-year'" in str(err.value)


def test_malformed_layout_and_duplicate_ids(tmp_path):
    with pytest.raises(SquadFormatError, match='"data" list'):
        parse_squad({"version": "1.1"}, "x.json")
    obj = json.loads(TINY.read_text(encoding="utf-8"))
    obj["data"][1]["paragraphs"][0]["qas"].append(copy.deepcopy(obj["data"][0]["paragraphs"][0]["qas"][0]))
    with pytest.raises(SquadFormatError, match="'q-start'.*used twice"):
        parse_squad(obj, "x.json")
    with pytest.raises(FileNotFoundError, match="task.data.files"):
        load_squad_file(tmp_path / "missing.json")


def test_markup_is_stripped_to_prose():
    text = ("{{Infobox|a={{b}}}}'''Limmat''' is a [[river]] in [[Switzerland|Swiss]] land.&lt;ref&gt;x&lt;/ref&gt; "
            "See [http://example.org the site].\n[[File:x.jpg|thumb|A [[river]]]]\n{| class=t\n| cell\n|}")
    out = strip_markup(text)
    assert out.split("\n")[0] == "Limmat is a river in Swiss land. See the site."
    assert "File" not in out and "cell" not in out
    articles = dict(wiki_articles(str(WIKI), min_words=10))
    assert set(articles) == {"Limmat", "Aare", "Brugg", "Reuss"}  # redirect and talk page skipped
    for paragraphs in articles.values():
        for p in paragraphs:
            assert not any(m in p for m in ("[[", "{{", "<ref", "|", "==", "thumb", "list item"))


def test_sentences_spans_and_questions():
    text = "Dr. Smith met J. R. Tolkien in 1950. They spoke. It rained on 7 May 1951!"
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "Dr. Smith met J. R. Tolkien in 1950.", "They spoke.", "It rained on 7 May 1951!"]
    kinds = {k: "It rained on 7 May 1951 in Zurich, where 1,200 people saw the storm."[a:b]
             for k, a, b, _, _ in find_spans("It rained on 7 May 1951 in Zurich, where 1,200 people saw the storm.")}
    assert kinds == {"date": "7 May 1951", "name": "Zurich", "number": "1,200", "noun_phrase": "storm"}


def _all_qas(split_obj):
    for article in split_obj["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                yield article["title"], paragraph["context"], qa


def test_generator_output_is_valid_squad_split_by_article(tmp_path):
    sets, stats = generate(str(WIKI), fractions=(0.5, 0.25, 0.25), progress=False)
    assert stats["kept"] == sum(len(list(_all_qas(o))) for o in sets.values()) > 0
    titles = {s: {a["title"] for a in sets[s]["data"]} for s in sets}
    contexts = {s: {c for _, c, _ in _all_qas(sets[s])} for s in sets}
    for a in sets:
        assert sets[a]["data"], a
        for b in sets:
            if a < b:
                assert not titles[a] & titles[b] and not contexts[a] & contexts[b]
    for split, obj in sets.items():
        parse_squad(obj, split)  # the loader's validation: every answer_start points at its text
        for _, context, qa in _all_qas(obj):
            ans = qa["answers"][0]
            assert context[ans["answer_start"]:ans["answer_start"] + len(ans["text"])] == ans["text"]
            q = qa["question"].lower()
            assert q.endswith("?") and re.match(r"(\w+ )?(who|what|which|when|where|how)\b", q), q  # wh-word first
    assert generate(str(WIKI), fractions=(0.5, 0.25, 0.25), progress=False)[0] == sets  # deterministic
    # written once into the cache, read by the same loader, not regenerated on the second call
    paths = prepare_offline(tmp_path, str(WIKI), {"fractions": [0.5, 0.25, 0.25]})
    stamp = {s: p.stat().st_mtime_ns for s, p in paths.items()}
    assert sum(len(load_squad_file(p)) for p in paths.values()) == sum(len(list(_all_qas(o))) for o in sets.values())
    again = prepare_offline(tmp_path, str(WIKI), {"fractions": [0.5, 0.25, 0.25]})
    assert {s: p.stat().st_mtime_ns for s, p in again.items()} == stamp
