"""Recorded speech from the Fish Fillets NG voice packs (Debian, GPL-2+): Czech and Dutch voice acting
with the exact lines in the game's dialogue scripts, prepared into 16 kHz manifests split BY LEVEL.

    manifests, stats = prepare_fillets_corpus(cache_root, FilletsSpec())   # {split: train.jsonl ...}
    python -m tasks.corpora.fillets_speech <cache_root>      # the same from the shell (train.py's root:
                                                             # ~/.cache/sru-experiments/speech or $SRU_DATA_DIR/speech)

Layout of the installed packages (fillets-ng-data, fillets-ng-data-cs, fillets-ng-data-nl):

    <root>/script/<level>/dialogs_<lang>.lua   dialogId("<id>", "<font>", "<English>") dialogStr("<line>")
    <root>/sound/<level>/<lang>/<id>.ogg       the recorded line (Ogg/Vorbis, 22.05 or 44.1 kHz)

The font names the speaking character (font_small: the small fish, font_big: the big one, font_statue, ...);
each language has its own actors, so the voice of a clip is "<lang>-<character>". Clips are joined to their
line by (level, id), decoded with soundfile, mixed to mono, resampled to 16 kHz (scipy's polyphase filter)
and written as 16-bit wav with a manifest row (the same JSONL as task.data.source=manifest).

Dropped, and counted in the printed summary: lines without a clip, clips without a line, empty lines,
placeholders (the game's "%1" format slots), lines written with digits (the spoken number words are not
in the text), lines with letters outside the language (e.g. Cyrillic quotes) and clips with no samples.

Why by level: every level is one scene with its own dialogue, so a test level's sentences were never heard
in training (a random split would put near-copies of one scene on both sides). Levels are drawn with a
fixed seed, both languages of a level go to the same split, and short lines that recur in several levels
("Aha.", "Proč?") are then removed from the training split (or validation) when their normalised text
occurs in a later split: no test transcript occurs in training. The corpus is built once into a folder
named by a hash of its specification (cached, never committed).
"""
from __future__ import annotations

import hashlib
import json
import random
import re
import time
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass
from math import gcd
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tasks.corpora.fillets_dialogs import parse_dialogs
from tasks.corpora.transcripts import letters, normalize_transcript

APT_COMMAND = "sudo apt-get install -y fillets-ng-data fillets-ng-data-cs fillets-ng-data-nl"
DEFAULT_ROOT = "/usr/share/games/fillets-ng"
LANGUAGES = ("cs", "nl")
ALPHABET = "cs+nl"   # one shared character set for both languages (tasks/speech/text.py)
SAMPLE_RATE = 16000
SPLITS = ("train", "valid", "test")
VERSION = 1          # bump when the preparation recipe changes: the cache folder name changes with it
_PLACEHOLDER = re.compile(r"%\d")


@dataclass
class FilletsSpec:
    root: str = DEFAULT_ROOT
    valid_fraction: float = 0.1   # of all clips, in whole levels
    test_fraction: float = 0.1
    seed: int = 25

    def key(self) -> str:
        blob = json.dumps({"version": VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()[:10]


def transcript_problem(text: str, lang: str) -> Optional[str]:
    """Why a dialogue line cannot be a reference transcript, or None when it can."""
    if not text.strip():
        return "empty line"
    if _PLACEHOLDER.search(text):
        return "placeholder (%1)"
    if any(c.isdigit() for c in text):
        return "written with digits"
    own = set(letters(ALPHABET))
    if any(c.isalpha() and c not in own for c in unicodedata.normalize("NFC", text.lower())):
        return "letters outside the language"
    if not normalize_transcript(text, ALPHABET):
        return "no letters"
    return None


def check_installed(root: Path, langs: Sequence[str]) -> None:
    missing = [str(p) for p in [root / "script"] + [root / "sound"] if not p.is_dir()]
    for lang in langs:
        if not any(root.glob(f"sound/*/{lang}/*.ogg")):
            missing.append(f"{root}/sound/<level>/{lang}/*.ogg")
    if missing:
        raise FileNotFoundError(f"the Fish Fillets NG voice packs are not installed (missing {', '.join(missing)}): "
                                f"run `{APT_COMMAND}`, or set task.data.fillets.root to their folder, or use "
                                f"task.data.source=offline|manifest|librispeech")


def collect_clips(root: Path, langs: Sequence[str] = LANGUAGES) -> Tuple[List[Dict], Counter, List[str]]:
    """Rows (level, lang, id, font, text, ogg, script:line) of the usable lines; drop counts; examples."""
    rows, dropped, examples = [], Counter(), []
    for lang in langs:
        recorded = {(p.parent.parent.name, p.stem): p for p in root.glob(f"sound/*/{lang}/*.ogg")}
        scripted = set()
        for script in sorted(root.glob(f"script/*/dialogs_{lang}.lua")):
            level = script.parent.name
            for d in parse_dialogs(script):
                where = f"{script}:{d.line}"
                scripted.add((level, d.id))
                ogg = recorded.get((level, d.id))
                problem = None if ogg else f"no clip {root}/sound/{level}/{lang}/{d.id}.ogg"
                problem = problem or transcript_problem(d.text, lang)
                if problem:
                    dropped["line without a clip" if ogg is None else problem] += 1
                    if len(examples) < 8:
                        examples.append(f"{where}: {d.id}: {problem}")
                    continue
                rows.append({"level": level, "language": lang, "dialog_id": d.id, "font": d.font,
                             "raw_text": d.text, "english": d.english, "ogg": ogg, "script": where})
        dropped["clip without a script line"] += sum(key not in scripted for key in recorded)
    return rows, dropped, examples


def split_levels(rows: Sequence[Dict], valid_fraction: float, test_fraction: float, seed: int) -> Dict[str, str]:
    """level -> split: levels in a seeded order fill test, then valid, to their fraction of all clips."""
    per_level = Counter(r["level"] for r in rows)
    levels = sorted(per_level)
    random.Random(seed).shuffle(levels)
    total, assigned, filled = sum(per_level.values()), {}, {"test": 0, "valid": 0}
    targets = {"test": test_fraction * total, "valid": valid_fraction * total}
    for level in levels:
        split = next((s for s in ("test", "valid") if filled[s] < targets[s]), "train")
        assigned[level] = split
        if split != "train":
            filled[split] += per_level[level]
    return assigned


def remove_shared_texts(rows_by_split: Dict[str, List[Dict]]) -> Dict[str, int]:
    """Drop from train (and valid) every row whose normalised text occurs in a later split (test, then
    valid), in either language (Czech and Dutch share words like "au"): no evaluation transcript is ever
    a training transcript. Returns rows removed per split."""
    removed = {}
    later: set = set()
    for split in ("test", "valid", "train"):
        keep = [r for r in rows_by_split[split] if r["text"] not in later]
        removed[split] = len(rows_by_split[split]) - len(keep)
        rows_by_split[split] = keep
        later |= {r["text"] for r in keep}
    return removed


def shared_texts(manifests: Dict[str, Path]) -> Dict[Tuple[str, str], List[str]]:
    """(split, split) -> transcripts found in both manifests (the prepare step makes these empty)."""
    texts = {s: {json.loads(line)["text"] for line in open(p, encoding="utf-8") if line.strip()}
             for s, p in manifests.items()}
    return {(a, b): sorted(texts[a] & texts[b]) for i, a in enumerate(SPLITS) for b in SPLITS[i + 1:]
            if texts[a] & texts[b]}


def decode_16k(ogg: Path, where: str) -> np.ndarray:
    """Mono float32 at 16 kHz from an Ogg/Vorbis (or any libsndfile) file."""
    import soundfile
    from scipy.signal import resample_poly

    try:
        wave, sr = soundfile.read(str(ogg), dtype="float32", always_2d=True)
    except Exception as err:  # LibsndfileError / RuntimeError by soundfile version
        raise ValueError(f"cannot decode {ogg} (the clip of {where}): {err}; reinstall the voice pack "
                         f"(`sudo apt-get install --reinstall fillets-ng-data-cs fillets-ng-data-nl`)") from None
    wave = wave.mean(axis=1)
    if sr != SAMPLE_RATE and wave.size:
        g = gcd(SAMPLE_RATE, sr)
        wave = resample_poly(wave, SAMPLE_RATE // g, sr // g).astype(np.float32)
    return wave


def prepare_fillets_corpus(cache_root: Path, spec: Optional[FilletsSpec] = None) -> Tuple[Dict[str, Path], Dict]:
    """Build the corpus once (a folder per spec hash); return the manifest of each split and the
    statistics written beside them (clips, hours, voices, languages per split; drops)."""
    import soundfile

    spec = spec or FilletsSpec()
    out = Path(cache_root).expanduser() / f"fillets-{spec.key()}"
    manifests = {s: out / f"{s}.jsonl" for s in SPLITS}
    stats_file = out / "corpus.json"
    if stats_file.is_file() and all(p.is_file() for p in manifests.values()):
        return manifests, json.loads(stats_file.read_text())
    root = Path(spec.root).expanduser()
    check_installed(root, LANGUAGES)
    t0 = time.time()
    rows, dropped, examples = collect_clips(root, LANGUAGES)
    assigned = split_levels(rows, spec.valid_fraction, spec.test_fraction, spec.seed)
    by_split: Dict[str, List[Dict]] = {s: [] for s in SPLITS}
    for i, r in enumerate(rows):
        wave = decode_16k(r["ogg"], r["script"])
        if wave.size < SAMPLE_RATE // 10 or not np.any(wave):  # empty clips (no samples, or 0.1 s of silence)
            dropped["empty audio"] += 1
            continue
        rel = Path("wav") / r["language"] / r["level"] / f"{r['dialog_id']}.wav"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(str(out / rel), wave, SAMPLE_RATE, subtype="PCM_16")
        voice = f"{r['language']}-{r['font'].removeprefix('font_')}"
        by_split[assigned[r["level"]]].append({
            "id": f"{r['language']}/{r['level']}/{r['dialog_id']}", "audio": str(rel),
            "duration": round(wave.size / SAMPLE_RATE, 3), "text": normalize_transcript(r["raw_text"], ALPHABET),
            "language": r["language"], "speaker": voice, "voice": voice, "level": r["level"],
            "script": r["script"], "transcript": r["raw_text"]})
        if (i + 1) % 500 == 0 or i + 1 == len(rows):
            print(f"[speech] fillets: decoded {i + 1}/{len(rows)} clips ({time.time() - t0:.0f}s)", flush=True)
    removed = remove_shared_texts(by_split)
    stats: Dict = {"root": str(root), "dropped": dict(dropped), "drop_examples": examples,
                   "removed_shared_text": removed, "splits": {}}
    for split, part in by_split.items():
        stats["splits"][split] = {
            "clips": len(part), "hours": round(sum(r["duration"] for r in part) / 3600, 3),
            "levels": sorted({r["level"] for r in part}),
            "languages": dict(sorted(Counter(r["language"] for r in part).items())),
            "voices": dict(Counter(r["voice"] for r in part).most_common()),
            "hours_per_language": {lang: round(sum(r["duration"] for r in part if r["language"] == lang) / 3600, 3)
                                   for lang in LANGUAGES}}
        tmp = manifests[split].with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part), encoding="utf-8")
        tmp.replace(manifests[split])
    stats["shared_text"] = {f"{a}/{b}": t for (a, b), t in shared_texts(manifests).items()}
    stats_file.write_text(json.dumps(stats, ensure_ascii=False, indent=1), encoding="utf-8")  # last: marks done
    return manifests, stats


def describe(manifests: Dict[str, Path], stats: Dict, languages: Sequence[str]) -> str:
    """The lines a run prints: manifests and hours per split, drops, shared transcripts."""
    lines = []
    for split in SPLITS:
        s = stats["splits"][split]
        hours = sum(s["hours_per_language"].get(lang, 0.0) for lang in languages)
        clips = sum(s["languages"].get(lang, 0) for lang in languages)
        lines.append(f"[speech] fillets {split}: {manifests[split]} ({clips} clips, {hours:.2f} h, "
                     f"{len(s['levels'])} levels, languages {'+'.join(languages)})")
    drops = ", ".join(f"{n} {why}" for why, n in sorted(stats["dropped"].items()))
    removed = ", ".join(f"{n} from {s}" for s, n in stats["removed_shared_text"].items() if n)
    lines.append(f"[speech] fillets: dropped {drops}; transcripts also in a later split removed: {removed or 'none'}")
    shared = stats.get("shared_text") or {}
    lines.append("[speech] fillets: no transcript occurs in two splits" if not shared else
                 f"[speech] fillets: WARNING transcripts in two splits: {shared}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m tasks.corpora.fillets_speech <cache_root>: only prepare, print the manifests
    import sys

    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m tasks.corpora.fillets_speech <cache root> "
                         "(task=speech uses ~/.cache/sru-experiments/speech, or $SRU_DATA_DIR/speech)")
    found, corpus = prepare_fillets_corpus(Path(sys.argv[1]))
    print(describe(found, corpus, LANGUAGES))
