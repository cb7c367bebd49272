"""The project's own check sets (``checks/*.tsv``, written for the project, no sentence in the corpus) and their
scorer: BLEU / chrF per domain and, for the number check, the share of the sources' numbers that the
translations carry.

    tail -n +2 tasks/translation/checks/numbers.tsv | cut -f1 | python predict.py run=<run> > hyp.txt
    python -m tasks.translation.check_sets tasks/translation/checks/numbers.tsv hyp.txt

A number of the source counts as carried when the translation holds the same value once per occurrence:
as digits (``10:30`` is two numbers, 10 and 30; ``5th`` is 5), as a German cardinal word (``fünfundvierzig``)
or as a German ordinal word (``fünften`` for "fifth"). "one" is not counted (a pronoun as often as a number).
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from tasks.translation.numbers import german_word, numbers_of

CHECKS = Path(__file__).resolve().parent / "checks"
_EN_ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
                "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
                "eighteenth", "nineteenth", "twentieth"]
EN_ORDINAL_VALUES = {w: i for i, w in enumerate(_EN_ORDINALS, 1)}
EN_ORDINAL_VALUES.update({"thirtieth": 30, "hundredth": 100})
_EN_ORDINAL = re.compile(r"\b(" + "|".join(EN_ORDINAL_VALUES) + r")\b", re.IGNORECASE)
_IRREGULAR_DE = {1: "erst", 3: "dritt", 7: "siebt", 8: "acht"}


def _german_ordinal_stem(value: int) -> str:
    if value in _IRREGULAR_DE:
        return _IRREGULAR_DE[value]
    return german_word(value) + ("t" if value < 20 else "st")


_DE_ORDINAL = {_german_ordinal_stem(v): v for v in range(1, 32)}
_DE_ORDINAL[_german_ordinal_stem(100)] = 100
_DE_TIMES = {german_word(v): v for v in range(2, 100)}
_DE_TIMES_WORD = re.compile(r"\b(" + "|".join(sorted(_DE_TIMES, key=len, reverse=True)) + r")mal\b", re.IGNORECASE)
_DE_ORDINAL_WORD = re.compile(r"\b(" + "|".join(sorted(_DE_ORDINAL, key=len, reverse=True)) + r")(e|er|en|es|em)\b",
                              re.IGNORECASE)


def source_numbers(text: str) -> List[int]:
    """The values of an English sentence's numbers: digit runs, cardinal words (two and up), ordinal words."""
    values = [int(n.value) for n in numbers_of(text, "en")]
    values += [EN_ORDINAL_VALUES[m.group(1).lower()] for m in _EN_ORDINAL.finditer(text)]
    return values


def translation_numbers(text: str) -> Counter:
    """The values a German sentence holds: digit runs, cardinal words, ordinal words (any ending), and
    multiplicatives ("dreimal" for "three times")."""
    values = Counter(int(n.value) for n in numbers_of(text, "de"))
    values.update(_DE_ORDINAL[m.group(1).lower()] for m in _DE_ORDINAL_WORD.finditer(text))
    values.update(_DE_TIMES[m.group(1).lower()] for m in _DE_TIMES_WORD.finditer(text))
    return values


def carried(source: str, translation: str) -> Tuple[int, int]:
    """(numbers of ``source`` found in ``translation``, numbers of ``source``)."""
    wanted = source_numbers(source)
    held = translation_numbers(translation)
    found = 0
    for value in wanted:
        if held[value] > 0:
            held[value] -= 1
            found += 1
    return found, len(wanted)


def read_check_set(path: Path) -> List[Dict[str, str]]:
    """A check set: tab-separated, a header row naming the columns (``en``, ``de``, optionally ``domain``)."""
    lines = [line.rstrip("\n").split("\t") for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    header = lines[0]
    if "en" not in header or "de" not in header:
        raise ValueError(f"{path}: the header row {header} must name the columns en and de (tab-separated)")
    rows = []
    for i, fields in enumerate(lines[1:], 2):
        if len(fields) != len(header):
            raise ValueError(f"{path} line {i}: {len(fields)} tab-separated fields, the header has {len(header)}")
        rows.append(dict(zip(header, fields)))
    return rows


def score(rows: Sequence[Dict[str, str]], hypotheses: Sequence[str]) -> Dict[str, Dict[str, float]]:
    """Per domain and overall (``all``): sentences, BLEU, chrF and the numbers carried (found / total, share)."""
    import sacrebleu

    if len(rows) != len(hypotheses):
        raise ValueError(f"{len(hypotheses)} translations for {len(rows)} check sentences: one line per sentence, "
                         f"in order")
    groups: Dict[str, List[int]] = {"all": list(range(len(rows)))}
    for i, row in enumerate(rows):
        if row.get("domain"):
            groups.setdefault(row["domain"], []).append(i)
    out = {}
    for name, index in groups.items():
        hyps, refs = [hypotheses[i] for i in index], [rows[i]["de"] for i in index]
        found = total = 0
        for i in index:
            f, t = carried(rows[i]["en"], hypotheses[i])
            found, total = found + f, total + t
        out[name] = {"sentences": len(index), "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
                     "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2), "numbers": total,
                     "numbers_carried": found, "carried_share": round(found / total, 4) if total else float("nan")}
    return out


def main(argv: Sequence[str] = None) -> Dict[str, Dict[str, float]]:
    parser = argparse.ArgumentParser(description="Score translations of a check set (BLEU, chrF, numbers carried)")
    parser.add_argument("check_set", type=Path, help="a checks/*.tsv file (en, de[, domain])")
    parser.add_argument("hypotheses", type=Path, help="one translation per line, in the check set's order")
    args = parser.parse_args(argv)
    rows = read_check_set(args.check_set)
    hyps = args.hypotheses.read_text(encoding="utf-8").splitlines()
    result = score(rows, hyps)
    for name, r in result.items():
        numbers = (f"; numbers carried {r['numbers_carried']}/{r['numbers']} ({100 * r['carried_share']:.1f}%)"
                   if r["numbers"] else "")
        print(f"{args.check_set.name} {name}: {r['sentences']} sentences, BLEU {r['bleu']:.2f}, chrF {r['chrf']:.2f}{numbers}")
    return result


if __name__ == "__main__":
    try:
        main()
    except (ValueError, FileNotFoundError) as err:
        print(f"[check_sets] error: {err}", file=sys.stderr)
        sys.exit(2)
