"""Numbers survive translation: placeholders before subword encoding, restored after decoding.

A small model over 4,000 subwords copies digits badly and confuses cardinal words of similar spelling
("fifteen" / "fünfzig"). So, before encoding, every run of digits of the source (``15``, the ``10`` and
``30`` of ``10:30``, the ``5`` of ``5th``) and every English cardinal word from two up (``five``,
``twenty-five``, ``two hundred``) becomes a placeholder ``<n0>``, ``<n1>``, ... in order of appearance
(one subword each: sentencepiece user symbols). The model learns to place the placeholders (identity
tokens, easy to copy); after decoding, ``<nk>`` becomes the source's k-th number again: digits as written,
a word as the German word (``fünfundzwanzig``). Separators stay text, so the model translates them
(``3.5`` -> ``3,5``, ``5th`` -> ``5.``) as it learnt from the corpus.

Training pairs are masked alike: a target number gets the placeholder of the source number with the same
digits or value (first unused one), so the model sees which source number goes where; a target number with
no counterpart stays as written. "one" / "ein" are left to the model (a pronoun and an inflected article
as often as a number), and so are ordinal words (German inflects them: "dritte", "dritten").
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

MAX_PLACEHOLDERS = 10
PLACEHOLDERS = tuple(f"<n{k}>" for k in range(MAX_PLACEHOLDERS))
_PLACEHOLDER = re.compile(r"<n(\d)>")

_EN_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
             "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_EN_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
            "ninety": 90}
_EN_VALUES = {**{w: i for i, w in enumerate(_EN_UNITS)}, **_EN_TENS}
_DE_UNITS = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn", "elf",
             "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn", "achtzehn", "neunzehn"]
_DE_TENS = {20: "zwanzig", 30: "dreißig", 40: "vierzig", 50: "fünfzig", 60: "sechzig", 70: "siebzig",
            80: "achtzig", 90: "neunzig"}

_WORD = r"(?:zero|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|" \
        r"seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
_UNIT = r"(?:one|two|three|four|five|six|seven|eight|nine)"
# a cardinal phrase: "five", "twenty-five", "two hundred", "three thousand", "a hundred" is left alone
_EN_NUMBER = re.compile(rf"\b{_WORD}(?:-{_UNIT})?(?:\s+(?:hundred|thousand))?\b", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Number:
    text: str        # as the source wrote it
    value: str       # digits ("05" stays "05") or the word's value ("25")
    word: bool       # written as a word: restored as the German word


def english_word_value(phrase: str) -> int:
    """The value of a cardinal phrase matched by ``_EN_NUMBER`` ("twenty-five" -> 25, "two hundred" -> 200)."""
    words = phrase.lower().replace("-", " ").split()
    total = 0
    for w in words:
        if w == "hundred":
            total *= 100
        elif w == "thousand":
            total *= 1000
        else:
            total += _EN_VALUES[w]
    return total


def german_word(value: int) -> str:
    """The German cardinal word of 0 <= value < 1,000,000 ("fünfundzwanzig", "zweihundert")."""
    if value < 20:
        return _DE_UNITS[value]
    if value < 100:
        tens, unit = divmod(value, 10)
        return _DE_TENS[tens * 10] if unit == 0 else ("ein" if unit == 1 else _DE_UNITS[unit]) + "und" + _DE_TENS[tens * 10]
    if value < 1000:
        hundreds, rest = divmod(value, 100)
        head = ("ein" if hundreds == 1 else _DE_UNITS[hundreds]) + "hundert"
        return head + (german_word(rest) if rest else "")
    thousands, rest = divmod(value, 1000)
    head = ("ein" if thousands == 1 else german_word(thousands)) + "tausend"
    return head + (german_word(rest) if rest else "")


_DE_VALUES = {german_word(v): v for v in range(2, 100)}
_DE_VALUES.update({german_word(v): v for v in (100, 200, 300, 400, 500, 1000, 2000, 10000)})
_DE_NUMBER = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, _DE_VALUES), key=len, reverse=True)) + r")\b",
                        re.IGNORECASE)


def _spans(text: str, lang: str) -> List[Tuple[int, int, Number]]:
    """The numbers of ``text`` in order: digit runs, and the cardinal words of ``lang`` (en or de)."""
    found = [(m.start(), m.end(), Number(m.group(), m.group(), False)) for m in _DIGITS.finditer(text)]
    if lang == "en":
        found += [(m.start(), m.end(), Number(m.group(), str(english_word_value(m.group())), True))
                  for m in _EN_NUMBER.finditer(text)]
    elif lang == "de":
        found += [(m.start(), m.end(), Number(m.group(), str(_DE_VALUES[m.group().lower()]), True))
                  for m in _DE_NUMBER.finditer(text)]
    return sorted(found, key=lambda s: s[0])


def mask_source(text: str, lang: str) -> Tuple[str, List[Number]]:
    """``text`` with its first ``MAX_PLACEHOLDERS`` numbers replaced by ``<n0>``, ``<n1>``, ... and the numbers
    (later ones stay as written)."""
    numbers: List[Number] = []
    out, last = [], 0
    for start, end, number in _spans(text, lang):
        if len(numbers) == MAX_PLACEHOLDERS:
            break
        out.append(text[last:start] + PLACEHOLDERS[len(numbers)])
        numbers.append(number)
        last = end
    out.append(text[last:])
    return "".join(out), numbers


def mask_target(text: str, lang: str, numbers: Sequence[Number]) -> str:
    """The target of a training pair: each number equal in value to a source number (the first unused one)
    becomes that number's placeholder; the others stay as written."""
    unused: Dict[str, List[int]] = {}
    for k, n in enumerate(numbers):
        unused.setdefault(_key(n.value), []).append(k)
    out, last = [], 0
    for start, end, number in _spans(text, lang):
        slots = unused.get(_key(number.value))
        if not slots:
            continue
        out.append(text[last:start] + PLACEHOLDERS[slots.pop(0)])
        last = end
    out.append(text[last:])
    return "".join(out)


def _key(value: str) -> str:
    return value.lstrip("0") or "0"


def mask_pair(source: str, target: str, src_lang: str, tgt_lang: str) -> Tuple[str, str]:
    masked, numbers = mask_source(source, src_lang)
    return masked, mask_target(target, tgt_lang, numbers)


def restore(text: str, numbers: Sequence[Number], tgt_lang: str) -> str:
    """The decoded ``text`` with every ``<nk>`` replaced by the k-th source number: digits as written, a word
    in ``tgt_lang`` (German: ``german_word``, capitalised at the start of the sentence). A placeholder with no
    source number (the model invented it) is dropped, and so is a placeholder's repetition: every training
    target holds each placeholder at most once (``mask_target``), so a second one is the decoder stuttering."""
    used = set()

    def render(m: re.Match) -> str:
        k = int(m.group(1))
        if k >= len(numbers) or k in used:
            return ""
        used.add(k)
        n = numbers[k]
        if not n.word:
            return n.text
        word = german_word(int(n.value)) if tgt_lang == "de" and int(n.value) < 1_000_000 else n.text.lower()
        return word[:1].upper() + word[1:] if m.start() == 0 else word
    return " ".join(_PLACEHOLDER.sub(render, text).split())


def numbers_of(text: str, lang: str) -> List[Number]:
    """Every number of ``text`` (digit runs and cardinal words), for the number check's scorer."""
    return [n for _, _, n in _spans(text, lang)]

