"""A new-voice check set in Czech and Dutch: sentences written for it (``tasks/corpora/new_voice_sentences/
<lang>.txt``, everyday language, none of them a transcript of the voice-pack corpus) spoken by espeak-ng
voices that no training corpus of the project uses, written as manifests evaluate.py scores.

    python -m tasks.corpora.new_voices [--out DIR]          # prints the two manifests' paths
    python evaluate.py run=<run>/model.pt file=<DIR>/new_voices_report.jsonl  # CER per language, language_accuracy

Each language's 40 sentences are split once: the first 20 are the ``tune`` half (decoding settings may be
chosen on it), the last 20 the ``report`` half (never tuned on; the figures in tasks/speech/README.md).
Every sentence is read by three voices of espeak-ng (the language's own voice and two of its variants) at
espeak's default speed and pitch, resampled to 16 kHz mono by sox (tasks/corpora/speech_synthesis.py).
The audio is generated into the cache folder (``$SRU_DATA_DIR/speech`` or ``~/.cache/sru-experiments/
speech``), never committed; the same texts and voices give the same folder.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Dict, List, Optional

from tasks.corpora.speech_synthesis import check_tools, default_cache_dir, synthesise_voice

SENTENCES = Path(__file__).with_name("new_voice_sentences")
LANGUAGES = ("cs", "nl")
VARIANTS = ("", "+f4", "+m6")   # the language's own voice and two variants no training split of any corpus uses
TUNE_SENTENCES = 20             # the first sentences of each file; the rest is the report half
HALVES = ("tune", "report")


def sentences(language: str) -> List[str]:
    lines = [line.strip() for line in (SENTENCES / f"{language}.txt").read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def plan() -> List[Dict]:
    """One clip per (language, sentence, voice), as tasks/corpora/speech_synthesis.py synthesises them."""
    clips = []
    for lang in LANGUAGES:
        for k, text in enumerate(sentences(lang)):
            for variant in VARIANTS:
                name = variant.lstrip("+") or "plain"
                clips.append({"id": f"{lang}-{k:02d}-{name}", "engine": "espeak", "voice": lang + variant,
                              "espeak_speed": 175, "espeak_pitch": 50, "tempo": 1.0, "pitch_cents": 0,
                              "text": text, "language": lang, "half": HALVES[k >= TUNE_SENTENCES]})
    return clips


def prepare(cache_root: Optional[Path] = None, quiet: bool = False) -> Dict[str, Path]:
    """Synthesise the set once (a folder per hash of the plan); the manifest of each half."""
    clips = plan()
    key = hashlib.sha1(json.dumps(clips, sort_keys=True).encode()).hexdigest()[:10]
    out = Path(cache_root or default_cache_dir()).expanduser() / f"new-voice-check-{key}"
    manifests = {half: out / f"new_voices_{half}.jsonl" for half in HALVES}
    if all(p.is_file() for p in manifests.values()):
        return manifests
    check_tools([("espeak", c["voice"], "", "") for c in clips[:1]])
    wav_dir = out / "wav"
    wav_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    synthesise_voice(clips, wav_dir, lambda: None)
    import soundfile
    for half, path in manifests.items():
        rows = [{"id": f"{c['language']}/{c['id']}", "audio": f"wav/{c['id']}.wav",
                 "duration": round(soundfile.info(str(wav_dir / f"{c['id']}.wav")).duration, 3), "text": c["text"],
                 "speaker": f"espeak-{c['voice']}", "voice": f"espeak-{c['voice']}", "language": c["language"]}
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
    args = parser.parse_args(argv)
    for half, path in prepare(args.out).items():
        print(f"{half}: {path}")


if __name__ == "__main__":
    main()
