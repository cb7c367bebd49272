"""SQuAD examples -> model inputs: tokens with offsets, token features, answer token span, batches.

Token features of each paragraph token (DrQA's "exact match" and "token features", without a tagger):
  0 exact match      the token occurs in the question as written
  1 uncased match    ... after lower-casing
  2 term frequency   occurrences of the (lower-cased) token in the paragraph / paragraph length
  3 capitalised      first character upper case (DrQA uses NER tags; capitalisation is the tagger-free cue)
  4 numeric          holds a digit
  5 stem match       the token's stem (lower-cased, cut to 5 letters) is a question word's stem: "discovered" in
                     the paragraph for "discover" in "What did Fleming discover?" (do-support and voice changes
                     put a verb's other form in the question; DrQA uses the lemma)
  6 lemma or synonym with ``task.synonyms``: the token's WordNet lemma is a question word's lemma or synonym
                     ("found" for "discover"; WordNet: tasks/corpora/wordnet.py)
With ``task.tagger`` (default spacy_en_md) the named-entity type and part of speech of each token follow as
one-hot columns (tasks/squad/tagger.py), as DrQA's token features; they are kept as ids per paragraph and
expanded per batch. With the tagger and ``task.answer_type_match`` (default true) one more column marks the
tokens whose entity type is one the question asks for (tasks/squad/answer_types.py).
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

import torch
from torch import Tensor

from tasks.common.batching import pad_collate
from tasks.common.text import Vocabulary
from tasks.corpora.wordnet import POS_FILES, WordNet

from .answer_kinds import asks_place_or_time, kind_mask
from .answer_types import expected_types, type_match_column
from .data import SquadExample, char_to_token_span, tokenize
from .tagger import num_tag_features, one_hot_tags, paragraph_tags

NUM_FEATURES = 6
STEM_LETTERS = 5


@dataclass
class EncodedExample:
    example: SquadExample
    spans: List[Tuple[int, int]]          # character span of each (kept) context token
    context_words: List[str]              # vocabulary keys (lower-cased when task.lowercase)
    question_words: List[str]
    features: Tensor                      # (Lp, NUM_FEATURES) float32
    start: int                            # answer token span of the first gold answer; -1: none
    end: int
    context_ids: List[int] = None
    question_ids: List[int] = None
    tags: Optional[Tensor] = None         # (Lp, 2) uint8 [NER id, POS id], shared by a paragraph's questions
    answer_types: Optional[FrozenSet[str]] = None  # entity types the question asks for; None: no match column

    def with_ids(self, vocab: Vocabulary) -> "EncodedExample":
        return replace(self, context_ids=vocab.encode(self.context_words),
                       question_ids=vocab.encode(self.question_words))


def stem(word: str) -> str:
    """A crude, tagger-free stem: the first STEM_LETTERS letters of an alphabetic word of 4+ letters."""
    w = word.lower()
    return w[:STEM_LETTERS] if len(w) >= 4 and w.isalpha() else ""


def token_features(context_tokens: Sequence[str], question_tokens: Sequence[str]) -> Tensor:
    exact = set(question_tokens)
    uncased = {t.lower() for t in question_tokens}
    stems = {stem(t) for t in question_tokens} - {""}
    lower = [t.lower() for t in context_tokens]
    counts = Counter(lower)
    n = max(len(context_tokens), 1)
    rows = [[float(t in exact), float(lo in uncased), counts[lo] / n, float(t[:1].isupper()),
             float(any(ch.isdigit() for ch in t)), float(stem(t) in stems)] for t, lo in zip(context_tokens, lower)]
    return torch.tensor(rows, dtype=torch.float32).view(-1, NUM_FEATURES)


# ---- task.synonyms: people's words for the paragraph's ------------------------------------------------------
# A generated question repeats its sentence's words (84%, README), a person's does not (78% of the hand-written ones
# hold a content word their sentence lacks: "find" for "discovered"). The word features above see none of that, so
# one more column marks a paragraph word whose WordNet lemma is a question word's lemma or synonym, and training
# copies of questions with a word swapped for a synonym teach the reader to trust it where exact match is 0.

# function words and question words: never matched or swapped (their "synonyms" are other function words)
STOP = frozenset("""a an the of in on at to for from by with as and or but not no is are was were be been being am
do does did done have has had having it its he she they them his her their this that these those what which who
whom whose when where why how there here than then so such can could will would shall should may might must
one two first also about into over after before up out many much more most other some any all each
go get got make made take give come put set let""".split())  # light verbs: synonyms of everything


def content_word(token: str) -> bool:
    return token.isalpha() and len(token) > 2 and token.lower() not in STOP


def synonym_column(wordnet: WordNet, context_tokens: Sequence[str], question_tokens: Sequence[str]) -> Tensor:
    """(Lp, 1) float32: 1 on a paragraph content word whose lemma is a lemma or synonym of a question content
    word ("struck" for "strike", "found" for "discover"), 0 elsewhere."""
    wanted: Set[str] = set()
    for q in question_tokens:
        if content_word(q) and not q[:1].isupper():  # a name has no synonyms worth the noise
            wanted |= wordnet.all_lemmas(q) | wordnet.synonyms(q)
    wanted -= STOP
    marks = [float(content_word(t) and bool(wanted) and not wanted.isdisjoint(wordnet.all_lemmas(t)))
             for t in context_tokens]
    return torch.tensor(marks, dtype=torch.float32).view(-1, 1)


def swap_synonyms(wordnet: WordNet, word: str) -> FrozenSet[str]:
    """Synonyms safe to put in a question in ``word``'s place: ``word`` is a lemma and no other word's form
    ("saw" is also "see"), and only its commonest part of speech's first sense is used ("class": the noun's)."""
    if wordnet.all_lemmas(word) != {word}:
        return frozenset()
    senses = {pos: wordnet.senses[pos].get(word, []) for pos in POS_FILES}
    pos = max(POS_FILES, key=lambda p: len(senses[p]))
    return frozenset(wordnet.members[pos].get(senses[pos][0], ())) - {word} - STOP


def swap_candidates(wordnet: WordNet, question: Sequence[str], context: Set[str]) -> List[Tuple[int, List[str]]]:
    """(position, synonyms) of the question's lower-case content words that are their own lemma (so a synonym's
    base form fits: "What did Galileo discover?"), with the one-word synonyms the paragraph does not contain."""
    out = []
    for i, q in enumerate(question):
        after_wh = i > 0 and question[i - 1].lower() in ("which", "what", "whose", "how")  # the asked kind stays
        if not content_word(q) or not q.islower() or after_wh:
            continue
        choices = sorted(s for s in swap_synonyms(wordnet, q) if s not in context)
        if choices:
            out.append((i, choices))
    return out


def num_features(tagger: Optional[str], type_match: bool = False, synonyms: bool = False) -> int:
    """Feature columns per paragraph token: the word features (plus the lemma-or-synonym match with
    ``synonyms``), plus the tags with a tagger, plus the answer-type match with a tagger and ``type_match``."""
    return NUM_FEATURES + int(synonyms) + num_tag_features(tagger) + int(bool(tagger) and type_match)


def word_features(context_tokens: Sequence[str], question_tokens: Sequence[str],
                  wordnet: Optional[WordNet] = None) -> Tensor:
    """``token_features``, with the lemma-or-synonym column (``synonym_column``) after them given WordNet."""
    features = token_features(context_tokens, question_tokens)
    return features if wordnet is None else torch.cat([features, synonym_column(wordnet, context_tokens,
                                                                                 question_tokens)], 1)


def encode_split(examples: Sequence[SquadExample], lowercase: bool = True,
                 max_context_tokens: Optional[int] = None, tagger: Optional[str] = None,
                 tag_cache: Optional[Path] = None, type_match: bool = False,
                 wordnet: Optional[WordNet] = None) -> List[EncodedExample]:
    """Tokenise every example (each distinct paragraph once); contexts longer than ``max_context_tokens``
    are cut (an answer past the cut has no token span: training skips it, evaluation scores it 0 unless
    the reader finds the text earlier). With a ``tagger`` each paragraph is tagged once (``tag_cache``: a
    folder keeping the tags of this call's paragraphs for the next run); with the tagger and ``type_match``
    each question also gets the entity types it asks for; with ``wordnet`` the word features end with the
    lemma-or-synonym column."""
    cache: Dict[str, Tuple[List[str], List[Tuple[int, int]]]] = {}
    out = []
    for ex in examples:
        if ex.context not in cache:
            tokens, spans = tokenize(ex.context)
            if not tokens:  # whitespace-only context: one empty token so every tensor has a row
                tokens, spans = [""], [(0, 0)]
            if max_context_tokens:
                tokens, spans = tokens[: int(max_context_tokens)], spans[: int(max_context_tokens)]
            cache[ex.context] = (tokens, spans)
        tokens, spans = cache[ex.context]
        q_tokens, _ = tokenize(ex.question)
        q_tokens = q_tokens or ["?"]
        start = end = -1
        span = char_to_token_span(spans, ex.answer_starts[0], ex.answer_starts[0] + len(ex.answers[0]))
        if span is not None:
            start, end = span
        norm = (lambda ws: [w.lower() for w in ws]) if lowercase else list
        out.append(EncodedExample(ex, spans, norm(tokens), norm(q_tokens), word_features(tokens, q_tokens, wordnet),
                                  start, end))
    if tagger and out:
        contexts = list(cache)
        tags = dict(zip(contexts, paragraph_tags(contexts, [cache[c][1] for c in contexts], tag_cache,
                                                 progress=tag_cache is not None)))
        out = [replace(ex, tags=tags[ex.example.context],
                       answer_types=expected_types(ex.question_words) if type_match else None) for ex in out]
    return out


def synonym_questions(encoded: Sequence[EncodedExample], wordnet: WordNet, share: float, seed: int,
                      lowercase: bool = True) -> List[EncodedExample]:
    """Training copies of about ``share`` of the questions, each with one lower-case content word in its base
    form replaced by a WordNet synonym the paragraph does not contain ("What did Galileo discover?" -> "What
    did Galileo find?"); features, answer types and the question text follow, the paragraph and answer stay.
    Questions without such a word get no copy. Seeded: the same copies in every run of a corpus."""
    rng = random.Random(seed)
    out = []
    for ex in encoded:
        if rng.random() >= share:
            continue
        q_tokens, q_spans = tokenize(ex.example.question)
        context = [ex.example.context[s:e] for s, e in ex.spans]
        candidates = swap_candidates(wordnet, q_tokens, {w.lower() for w in context})
        if not candidates:
            continue
        i, choices = candidates[rng.randrange(len(candidates))]
        word = choices[rng.randrange(len(choices))]
        q_tokens = q_tokens[:i] + [word] + q_tokens[i + 1:]
        a, b = q_spans[i]
        question = ex.example.question[:a] + word + ex.example.question[b:]
        words = [w.lower() for w in q_tokens] if lowercase else q_tokens
        out.append(replace(ex, example=replace(ex.example, qid=ex.example.qid + "~syn", question=question),
                           question_words=words, features=word_features(context, q_tokens, wordnet),
                           answer_types=None if ex.answer_types is None else expected_types(words)))
    return out


# words written with a dot that seldom end a sentence (titles, "Saint", "Mount", company forms, months)
ABBREVIATIONS = set("mr mrs ms dr st jr sr mt ft co inc ltd corp bros gen col lt sgt capt cmdr adm rev prof gov sen "
                    "rep pres no vol vs etc jan feb mar apr jun jul aug sep sept oct nov dec".split())


def sentence_ends(words: Sequence[str]) -> List[bool]:
    """Which tokens end a sentence: ".", "!" or "?" before a capital, a digit, a quote or the end, except the
    dot of an initial or an abbreviation ("J. S. Bach", "U.S.", "St. Louis", "Mr. Smith"); a short name is no
    abbreviation ("Tokyo was formerly known as Edo. It became ...")."""
    out = []
    for k, w in enumerate(words):
        nxt = words[k + 1] if k + 1 < len(words) else ""
        prev = words[k - 1] if k else ""
        abbreviation = w == "." and ((len(prev) == 1 and prev.isupper()) or prev.lower() in ABBREVIATIONS)
        out.append(w in (".", "!", "?") and not abbreviation and (not nxt or nxt[0].isupper() or nxt[0].isdigit()
                                                                   or nxt[0] in "\"'“‘"))
    return out


def _type_column(ex: EncodedExample) -> Optional[Tensor]:
    """(Lp, 1): 1 on the tokens of the entity type the question asks for; None without the column."""
    return None if ex.tags is None or ex.answer_types is None else type_match_column(ex.tags, ex.answer_types)


def _feature_rows(ex: EncodedExample, type_column: Optional[Tensor]) -> Tensor:
    if ex.tags is None:
        return ex.features
    return torch.cat([ex.features, one_hot_tags(ex.tags)] + ([] if type_column is None else [type_column]), 1)


def collate(examples: Sequence[EncodedExample], index: Sequence[int], pad_id: int,
            kinds: bool = False) -> Dict[str, Tensor]:
    """A batch; ``kinds``: the decoding mask ``type_match`` is narrowed to the kind the question asks for where
    the paragraph has one (answer_kinds.py; the feature column stays the entity-type one), and ``place_or_time``
    marks the "where" / "when" questions (their own prior, task.where_when_prior)."""
    context, context_mask_pad, _ = pad_collate([ex.context_ids for ex in examples], pad_id)
    question, question_mask_pad, _ = pad_collate([ex.question_ids for ex in examples], pad_id)
    type_columns = [_type_column(ex) for ex in examples]  # the feature column and the decoding mask, made once
    features, _, _ = pad_collate([_feature_rows(ex, col) for ex, col in zip(examples, type_columns)], 0.0)
    ends = torch.zeros(context.shape[::-1], dtype=torch.bool)  # (B, L): span decoding stays in a sentence
    type_match = torch.zeros(context.shape[::-1], dtype=torch.bool)  # (B, L): tokens of the asked entity type
    place_or_time = torch.tensor([kinds and asks_place_or_time(ex.question_words) for ex in examples])  # (B,)
    for b, (ex, column) in enumerate(zip(examples, type_columns)):
        words = [ex.example.context[s:e] for s, e in ex.spans]  # as written: context_words may be lower-cased
        ends[b, :len(words)] = torch.tensor(sentence_ends(words), dtype=torch.bool)
        if column is not None:
            type_match[b, :len(words)] = (kind_mask(ex.question_words, words, ex.tags, column) if kinds
                                          else column.squeeze(1).bool())
    return {"context": context, "context_mask_pad": context_mask_pad, "features": features, "sentence_end": ends,
            "type_match": type_match, "place_or_time": place_or_time,
            "question": question, "question_mask_pad": question_mask_pad,
            "start": torch.tensor([ex.start for ex in examples], dtype=torch.long),
            "end": torch.tensor([ex.end for ex in examples], dtype=torch.long),
            "index": torch.tensor(list(index), dtype=torch.long)}
