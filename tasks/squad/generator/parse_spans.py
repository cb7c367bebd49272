"""Spans of a parsed sentence for the question generator (tasks/squad/generator/natural_questions.py): the answer
rooted at a token and its type, a token's subtree, and the parts a question may leave out."""
from __future__ import annotations

from typing import Set

from .question_checks import words

DROPPED_DEPS = {"relcl", "appos", "parataxis", "advcl", "acl", "conj", "cc", "dep", "meta", "intj", "discourse"}


# a common noun naming a relation to the name after its "of": a person underlines the name ("the company of
# Gustave Eiffel" -> "Gustave Eiffel", "a distance of 42 kilometres" -> "42 kilometres")
RELATION_HEADS = {"company", "firm", "workshop", "studio", "family", "house", "distance", "height", "depth",
                  "length", "width", "area", "elevation", "altitude", "total", "sum", "amount", "age"}


def answer_range(head) -> range:
    """Token indices of the answer rooted at ``head``: its named entity, else the noun phrase without
    relative clauses, appositions, coordinations and trailing punctuation; a relation head before a name
    ("the company of X") gives the name alone."""
    if not head.ent_type_ and head.pos_ == "NOUN" and head.lower_ in RELATION_HEADS:
        of = next((c for c in head.children if c.dep_ == "prep" and c.lower_ == "of" and c.i == head.i + 1), None)
        pobj = None if of is None else next((c for c in of.children if c.dep_ == "pobj"), None)
        if pobj is not None and pobj.ent_type_:
            return answer_range(pobj)
    if head.ent_type_:
        for ent in head.doc.ents:
            if ent.start <= head.i < ent.end:
                return range(ent.start, ent.end)
    def kept(tok) -> bool:  # no clause, insertion or non-"of" phrase between the token and the head
        while tok != head:
            if tok.dep_ in DROPPED_DEPS or tok.dep_ == "punct" or (tok.dep_ == "prep" and tok.lower_ != "of"):
                return False
            tok = tok.head
        return True
    keep = {t.i for t in head.subtree if kept(t)}
    start, stop = head.i, head.i + 1  # the contiguous run of kept tokens around the head
    while start - 1 in keep:
        start -= 1
    while stop in keep:
        stop += 1
    while start < head.i and head.doc[start].dep_ in ("det", "predet", "poss", "case"):
        start += 1
    return range(start, stop)


ORG_WORDS = set("""party company corporation academy university council committee congress senate court army navy
association society union church bank league institute organization organisation federation ministry department
agency commission legislature club board band records college school parliament government assembly
conference foundation museum group team airlines network""".split())


def answer_type(doc, rng: range) -> str:
    """The answer's NER label, corrected where the small pipeline is often wrong: a name that is a PERSON
    elsewhere in the paragraph ("Lincoln" tagged ORG) is a PERSON; an ORG without an organisation word is
    asked with a plain "what"."""
    labels = [doc[i].ent_type_ for i in rng if doc[i].ent_type_]
    if not labels:
        return "NP"
    label = max(labels, key=labels.count)  # a tie goes to the first token's label (not to set order, which varies by process)
    text = doc[rng.start:rng.stop].text
    people = {e.text for e in doc.ents if e.label_ == "PERSON"}
    if label != "PERSON" and (text in people or any(p.split()[-1] == text for p in people)):
        return "PERSON"
    if label == "ORG" and not set(words(text)) & ORG_WORDS:
        return "ORG_NAME"
    return label


def subtree_range(tok) -> range:
    return range(tok.left_edge.i, tok.right_edge.i + 1)


def optional_parts(sent, keep_roles: Set[int]) -> Set[int]:
    """Tokens of clauses and insertions a question may leave out (never those in ``keep_roles``)."""
    drop: Set[int] = set()
    for tok in sent:
        if tok.dep_ in DROPPED_DEPS and not (set(subtree_range(tok)) & keep_roles):
            drop.update(subtree_range(tok))
    depth = 0  # parentheses and what they hold
    for tok in sent:
        if tok.text in "([":
            depth += 1
        if depth:
            drop.add(tok.i)
        if tok.text in ")]" and depth:
            depth -= 1
    return drop - keep_roles


def adjuncts(root, keep: Set[int]) -> Set[int]:
    """The root's time/place/manner adjuncts (prepositional phrases, adverbs): a subject question drops them."""
    out: Set[int] = set()
    for child in root.children:
        if child.dep_ in ("prep", "advmod", "npadvmod") and not (set(subtree_range(child)) & keep):
            out.update(subtree_range(child))
    return out
