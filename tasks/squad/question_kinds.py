"""The kinds of question issue 70 names, read from a question's words alone (never from its answer), for
scores by kind: ``python -m tasks.squad.score_predictions <data> <predictions> --by-kind``.

    question_kind("How high is Kilimanjaro?")            # "measures"
    question_kind("In which city is the museum?")        # "places by kind"

The first matching kind wins, in the order below; a question of none is "other".
"""
from __future__ import annotations

import re

KINDS = (
    ("measures", re.compile(r"\bhow (high|long|far|deep|large|tall|wide|big|heavy)\b"
                            r"|\b(length|height|area|depth|distance)\b")),
    ("time boundaries", re.compile(r"\b(begin|began|end|ended|start|started|finish|finished)\?$"
                                   r"|\bwhen did .* (begin|end|start)\b")),
    ("places by kind", re.compile(r"\b(which|what) (city|country|ocean|sea|river|continent|mountain|range|museum|"
                                  r"building|state|island|lake|desert|region|town)\b")),
    ("works and events", re.compile(r"\b(which|what|whose) (war|battle|treaty|mission|poem|painting|coalition|novel|"
                                    r"opera|symphony|revolution|event|book|work)\b")),
)


def question_kind(question: str) -> str:
    text = question.lower().strip()
    return next((name for name, pattern in KINDS if pattern.search(text)), "other")
