"""Checks on a generated question (tasks/squad/generator/natural_questions.py): is it malformed (``rejection``), does it
copy its sentence with only the answer swapped for a wh-word (``copies_sentence``), and how many of its words
come from the answer's sentence (``sentence_overlap``, tasks/squad/generator/question_stats.py)."""
from __future__ import annotations

import re
from typing import List, Optional

from .question_words import UNRESOLVED, WH_FOR_TYPE

WORD = re.compile(r"[\w'’-]+")


def words(text: str) -> List[str]:
    return [w.lower() for w in WORD.findall(text)]


WH_LEAD = {"who", "whom", "what", "which", "when", "where", "how", "many", "much", "long", "year", "in", "on",
           "at", "during", "since", "until", "country", "place"} | {w for v in WH_FOR_TYPE.values() for w in v.split()}


def strip_wh(question: str) -> List[str]:
    """The question's words after its leading wh-phrase ("In which country", "How many")."""
    q = words(question)
    k = 0
    while k < len(q) and q[k] in WH_LEAD:
        k += 1
    return q[k:]


def copies_sentence(question: str, sentence: str, answer: str) -> bool:
    """True when the question is its sentence with only the answer replaced by a wh-phrase, anywhere: the
    same words in the same order once the answer and the wh-words (and prepositions they take) are left out."""
    s, a = words(sentence), words(answer)
    for i in range(len(s) - len(a) + 1):
        if s[i:i + len(a)] == a:
            s = s[:i] + s[i + len(a):]
            break
    return [w for w in words(question) if w not in WH_LEAD] == [w for w in s if w not in WH_LEAD]


def sentence_overlap(question: str, sentence: str) -> float:
    """Share of the question's words (the wh-phrase left out) found in the answer's sentence."""
    q, s = strip_wh(question), set(words(sentence))
    return sum(w in s for w in q) / len(q) if q else 0.0


def rejection(question: str, answer: str, sentence: str) -> Optional[str]:
    """Why a candidate is malformed (None: kept): the generator drops these rather than train on noise."""
    q = words(question)
    if not 4 <= len(q) <= 22:
        return "length"
    if len(words(answer)) > 8 or not answer.strip():
        return "answer_length"
    allowed = {"which", "who", "whom", "whose", "that"}
    if re.search(r"^\S+.*?\b[A-Z][\w'’-]*\b.*\b(his|her|its)\b", question):
        allowed |= {"his", "her", "its"}  # a possessive after a name the question holds: "did Agassi renew his"
    if set(q) & (UNRESOLVED - allowed) or " that ?" in question:
        return "pronoun"
    if re.search(r"[()\[\]\"“”,;]", question):  # people's questions rarely hold these; here they mark a bad cut
        return "punctuation"
    if re.search(r"\b" + re.escape(answer.lower()) + r"\b", question.lower()):
        return "answer_in_question"
    if re.search(r"\b(\w+) \1\b", question.lower() + " | " + answer.lower()) or re.search(r"[,;:]\?$|\s[-–]\?$", question):
        return "broken"
    kind = re.match(r"(?:\w+ )?which (\w+) ", question.lower())  # "Which state is a state?" asks nothing
    if kind and re.search(r"\b" + kind.group(1) + r"\b", question.lower()[kind.end():]):
        return "broken"
    return None
