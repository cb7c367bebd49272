"""How much a SQuAD-format question set copies its paragraphs (reported in tasks/squad/README.md).

    stats = overlap_stats(load_squad_file(path))    # {"questions", "mean_word_overlap", ...}

For each question, the answer's sentence (the sentence of the paragraph holding ``answer_start``) and:
- ``mean_word_overlap``: the share of the question's words, its leading wh-phrase left out, found in that
  sentence (1.0 = every word is copied from it), averaged;
- ``new_content_word``: % of questions with a content word (not a stop word) absent from the sentence: a
  lower bound on SQuAD's "lexical variation" (synonyms, world knowledge);
- ``reordered``: % whose words shared with the sentence come in another order: SQuAD's "syntactic variation";
- ``outside_sentence``: % with a content word found elsewhere in the paragraph but not in the sentence (a
  pronoun resolved, a name from an earlier sentence): SQuAD's "multiple sentence reasoning".
SQuAD v1.1's published figures (Rajpurkar et al. 2016, Table 3, 192 dev questions read by hand): lexical
variation 33.3% (synonymy) + 9.1% (world knowledge), syntactic variation 64.1%, multiple sentence
reasoning 13.6%; these proxies count words, so they are comparable in kind, not exactly.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

from tasks.corpora.wiki_prose import split_sentences
from tasks.squad.generator.question_checks import strip_wh, words

STOP = set("""a an the of in on at to for from by with and or is are was were be been did do does has have had
as that this it its his her their he she they who whom which what when where how many much long s""".split())


def _sentence(context: str, start: int) -> str:
    for s, e in split_sentences(context):
        if s <= start < e:
            return context[s:e]
    return context


def _in_order(q: Sequence[str], s: Sequence[str]) -> bool:
    """q's words shared with s appear in s in the same relative order (first occurrences)."""
    shared = [w for w in q if w in s]
    positions = [s.index(w) for w in shared]
    return positions == sorted(positions)


def overlap_stats(examples: List) -> Dict[str, float]:
    n = len(examples)
    overlap = new_word = reordered = outside = 0.0
    for ex in examples:
        sentence = _sentence(ex.context, ex.answer_starts[0])
        q, s, para = strip_wh(ex.question), words(sentence), set(words(ex.context))
        overlap += sum(w in s for w in q) / len(q) if q else 0.0
        content = [w for w in q if w not in STOP]
        new_word += any(w not in s for w in content)
        outside += any(w not in s and w in para for w in content)
        reordered += not _in_order(q, s)
    pct = 100.0 / max(n, 1)
    return {"questions": n, "mean_word_overlap": overlap / max(n, 1), "new_content_word": new_word * pct,
            "reordered": reordered * pct, "outside_sentence": outside * pct}
