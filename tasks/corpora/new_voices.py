"""A new-voice check set in Czech and Dutch: sentences written for it (``tasks/corpora/new_voice_sentences/
<lang>.txt``, everyday language, none of them a transcript of the voice-pack corpus) spoken by espeak-ng
voices that no training corpus of the project uses, written as manifests evaluate.py scores.

    python -m tasks.corpora.new_voices [--out DIR]          # prints the two manifests' paths
    python evaluate.py run=<run>/model.pt file=<DIR>/new_voices_report.jsonl  # CER per language, language_accuracy
    python -m tasks.corpora.new_voices --engine festival    # the Czech sentences by another engine (below)

Each language's 40 sentences are split once: the first 20 are the ``tune`` half (decoding settings may be
chosen on it), the last 20 the ``report`` half (never tuned on; the figures in tasks/speech/README.md).
Every sentence is read by three voices of espeak-ng (the language's own voice and two of its variants) at
espeak's default speed and pitch, resampled to 16 kHz mono by sox (tasks/corpora/speech_synthesis.py).
``--engine festival``: the Czech sentences only (festival has no Dutch voice in Debian), the same halves,
read by the four Czech festival voices (``czech_dita``, ``czech_krb``, ``czech_machac``, ``czech_ph``:
diphones of recorded Czech speakers, another engine than any training copy; ``sudo apt-get install -y
festival festival-czech festvox-czech-dita festvox-czech-krb festvox-czech-machac festvox-czech-ph``).
The audio is generated into the cache folder (``$SRU_DATA_DIR/speech`` or ``~/.cache/sru-experiments/
speech``), never committed; the same texts and voices give the same folder.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Dict, List, Optional

from tasks.corpora.speech_synthesis import FESTIVAL_ENCODING, check_tools, default_cache_dir, synthesise_clips

SENTENCES = Path(__file__).with_name("new_voice_sentences")
LANGUAGES = ("cs", "nl")
VARIANTS = ("", "+f4", "+m6")   # the language's own voice and two variants no training split of any corpus uses
TUNE_SENTENCES = 20             # the first sentences of each file; the rest is the report half
HALVES = ("tune", "report")
FESTIVAL_CZECH = tuple(sorted(FESTIVAL_ENCODING))  # festival's Czech voices (Debian festvox-czech-*)
FESTIVAL_APT = ("sudo apt-get install -y festival festival-czech "
                + " ".join(f"festvox-czech-{v.split('_')[1]}" for v in FESTIVAL_CZECH))
ENGINES = ("espeak", "festival")


def sentences(language: str) -> List[str]:
    lines = [line.strip() for line in (SENTENCES / f"{language}.txt").read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def plan(engine: str = "espeak") -> List[Dict]:
    """One clip per (language, sentence, voice), as tasks/corpora/speech_synthesis.py synthesises them."""
    if engine == "festival":
        return [{"id": f"cs-{k:02d}-{voice}", "engine": "festival", "voice": voice, "tempo": 1.0, "pitch_cents": 0,
                 "text": text.replace('"', "'"), "language": "cs", "half": HALVES[k >= TUNE_SENTENCES]}
                for voice in FESTIVAL_CZECH for k, text in enumerate(sentences("cs"))]
    clips = []
    for lang in LANGUAGES:
        for k, text in enumerate(sentences(lang)):
            for variant in VARIANTS:
                name = variant.lstrip("+") or "plain"
                clips.append({"id": f"{lang}-{k:02d}-{name}", "engine": "espeak", "voice": lang + variant,
                              "espeak_speed": 175, "espeak_pitch": 50, "tempo": 1.0, "pitch_cents": 0,
                              "text": text, "language": lang, "half": HALVES[k >= TUNE_SENTENCES]})
    return clips


def check_festival_czech() -> None:
    missing = [v for v in FESTIVAL_CZECH if not Path(f"/usr/share/festival/voices/czech/{v}").is_dir()]
    if missing or shutil.which("festival") is None:
        raise OSError(f"--engine festival needs festival and its Czech voices ({', '.join(missing) or 'festival'} not "
                      f"found); install them with: {FESTIVAL_APT}")


def prepare(cache_root: Optional[Path] = None, quiet: bool = False, engine: str = "espeak") -> Dict[str, Path]:
    """Synthesise the set once (a folder per hash of the plan); the manifest of each half."""
    clips = plan(engine)
    key = hashlib.sha1(json.dumps(clips, sort_keys=True).encode()).hexdigest()[:10]
    out = Path(cache_root or default_cache_dir()).expanduser() / f"new-voice-check-{key}"
    manifests = {half: out / f"new_voices_{half}.jsonl" for half in HALVES}
    if all(p.is_file() for p in manifests.values()):
        return manifests
    if engine == "festival":
        check_festival_czech()
    check_tools([(engine, "", "", "")])
    wav_dir = out / "wav"
    wav_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    synthesise_clips(clips, wav_dir, workers=1)  # festival: one process per voice
    import soundfile
    for half, path in manifests.items():
        rows = [{"id": f"{c['language']}/{c['id']}", "audio": f"wav/{c['id']}.wav",
                 "duration": round(soundfile.info(str(wav_dir / f"{c['id']}.wav")).duration, 3), "text": c["text"],
                 "speaker": f"{engine}-{c['voice']}", "voice": f"{engine}-{c['voice']}", "language": c["language"]}
                for c in clips if c["half"] == half]
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        tmp.replace(path)  # last and atomically: a half-written folder is never taken as done
    if not quiet:
        print(f"[speech] new-voice check set: {len(clips)} clips synthesised in {time.time() - t0:.0f}s into {out}",
              flush=True)
    return manifests


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tasks.corpora.new_voices", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="cache root (default: $SRU_DATA_DIR/speech or "
                                                               "~/.cache/sru-experiments/speech)")
    parser.add_argument("--engine", choices=ENGINES, default="espeak", help="espeak: cs + nl (the judged set); "
                        "festival: the Czech sentences by festival's Czech voices")
    args = parser.parse_args(argv)
    for half, path in prepare(args.out, engine=args.engine).items():
        print(f"{half}: {path}")


if __name__ == "__main__":
    main()
