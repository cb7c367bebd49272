"""A name that its sentence introduces with the kind of thing it is: the class noun for "which + noun".

    named_class(head)   # "the album Abbey Road" -> ("album", Abbey Road's tokens); else None

Three forms (spaCy's parse of each):
    apposition  "the album Abbey Road", "the space shuttle Discovery"   noun <- appos name
    compound    "the ship HMS Beagle", "the river Thames"               name <- compound noun(s)
    "of"        "the city of Paris", "the island of Crete"               noun -> of -> name (places only)
A question then asks "Which album did the Beatles release in 1969?" and the answer is the name alone, so
the reader learns that the noun after "which" says what kind of span to look for, which people's questions
rely on ("On which ship did Darwin sail?", "Which space shuttle launched the Hubble telescope?").
"""
from __future__ import annotations

from typing import Optional, Tuple

# nouns that name a label rather than a kind of thing ("the name Smith", "the year 1990")
NOT_CLASSES = {"name", "title", "word", "term", "nickname", "pseudonym", "number", "year", "date", "phrase",
               "letter", "symbol", "surname", "label", "brand", "code"}
OF_CLASSES = {"city", "town", "village", "state", "province", "island", "region", "county", "kingdom", "port",
              "republic", "district", "isle", "borough", "municipality", "principality", "duchy", "emirate"}


def _is_class(tok) -> bool:
    return tok.pos_ == "NOUN" and tok.tag_ == "NN" and tok.is_alpha and tok.is_lower and tok.lower_ not in NOT_CLASSES


def _name(rng: range, doc) -> bool:
    """A run of proper-noun tokens (names may hold "of", "the", numbers) inside one named entity."""
    toks = [doc[i] for i in rng]
    ents = {(t.ent_iob_ != "O") for t in toks}
    return (ents == {True} and toks[0].pos_ == "PROPN" and toks[-1].pos_ in ("PROPN", "NUM")
            and all(t.pos_ in ("PROPN", "NUM", "ADP", "DET", "PART") and not t.is_punct for t in toks))


def named_class(head) -> Optional[Tuple[str, range]]:
    """(class noun, token range of the name) when the noun phrase headed by ``head`` is one of the forms."""
    doc = head.doc
    if _is_class(head):
        appos = next((c for c in head.children if c.dep_ == "appos" and c.i > head.i), None)
        if appos is not None and appos.left_edge.i == head.i + 1:
            rng = range(appos.left_edge.i, appos.right_edge.i + 1)
            if _name(rng, doc):
                nouns = [c for c in head.children if c.dep_ == "compound" and c.i < head.i]
                first = min([head.i] + [c.i for c in nouns if _is_class(c)])
                if all(_is_class(doc[i]) for i in range(first, head.i)):
                    return " ".join(doc[i].lower_ for i in range(first, head.i + 1)), rng
        of = next((c for c in head.children if c.dep_ == "prep" and c.lower_ == "of" and c.i == head.i + 1), None)
        pobj = None if of is None else next((c for c in of.children if c.dep_ == "pobj"), None)
        if head.lower_ in OF_CLASSES and pobj is not None and pobj.ent_type_ in ("GPE", "LOC"):
            rng = range(of.i + 1, pobj.right_edge.i + 1)
            if _name(rng, doc):
                return head.lower_, rng
        return None
    if head.pos_ == "PROPN":
        start = head.left_edge.i + (head.left_edge.dep_ == "det")
        nouns = 0
        while start + nouns < head.i and _is_class(doc[start + nouns]) and doc[start + nouns].dep_ == "compound":
            nouns += 1
        rng = range(start + nouns, head.i + 1)
        if nouns and head.right_edge.i == head.i and _name(rng, doc):
            return " ".join(doc[i].lower_ for i in range(start, start + nouns)), rng
    return None
