"""Synthetic copies of a training split: a share of its transcripts also spoken by espeak-ng, each in its own
language, by voices drawn from ONE pool that every language shares (``task.data.fillets.synthetic_share``).

Why: in the voice-pack corpus each language has its own actors, so a model can tell Czech from Dutch by the
voice and never learns to hear the language itself; on a new voice it then decodes Dutch in Czech spelling
(tasks/speech/README.md, "Languages"). Copies in which the same voices speak both languages take that cue
away, and show the model more than the corpus's four main actors.

The copies never touch what is measured: they join the training split only (validation and test stay the
recorded voice acting), they are marked ``kind: synthetic`` (the character LMs are fitted on the recorded
transcripts alone), and the pool leaves out every espeak voice a check set uses: the language's own voice
and the variants f4 / m6 (tasks/corpora/new_voices.py) and f5 / m7 (the offline corpus's test voices).

The audio goes into the cache folder (``synthetic-<hash>``, one per plan), never into the checkout; the same
transcripts, share, voices and seed give the same folder and the same files.
"""
from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Dict, List, Sequence

from tasks.corpora.speech_synthesis import synthesise_clips

# espeak-ng variants (formant and pitch settings, any language): the training pool, shared by all languages
VOICE_POOL = ("m1", "m2", "m3", "m4", "m5", "m8", "f1", "f2", "f3", "klatt", "klatt3", "iven")
HELD_OUT = ("", "f4", "m6", "f5", "m7")  # the check sets' voices ("" is the language's own voice)
VERSION = 1  # bump when the recipe changes: the cache folder changes with it


def plan_copies(utterances: Sequence, share: float, seed: int, voices: Sequence[str] = VOICE_POOL) -> List[Dict]:
    """Which utterances get a copy and how it is spoken: a pure function of (ids, texts, languages, share,
    seed, voices). Each utterance draws from its own generator, so adding one never changes another's copy."""
    if set(voices) & set(HELD_OUT):
        raise ValueError(f"synthetic copies: {sorted(set(voices) & set(HELD_OUT))} are voices of the "
                         f"new-voice check sets; training on them would leave no new voice to measure")
    clips = []
    for utt in utterances:
        if not utt.language:
            raise ValueError(f"synthetic copies: utterance {utt.id} names no language; espeak-ng needs one per "
                             f"utterance (the voice-pack corpus has them); set task.data.fillets.synthetic_share=0")
        rng = random.Random(f"{seed}/{utt.id}")
        if rng.random() >= share:
            continue
        variant = rng.choice(list(voices))
        clips.append({"id": f"{utt.id.replace('/', '_')}-{variant}", "engine": "espeak",
                      "voice": f"{utt.language}+{variant}", "variant": variant, "language": utt.language,
                      "espeak_speed": rng.randint(130, 190), "espeak_pitch": rng.randint(25, 75),
                      "tempo": 1.0, "pitch_cents": 0, "text": utt.text, "source": utt.id})
    return clips


def prepare_copies(utterances: Sequence, share: float, seed: int, cache_root: Path, workers: int = 2,
                   voices: Sequence[str] = VOICE_POOL) -> Path:
    """Synthesise the planned copies once; the path of their manifest (``synthetic.jsonl``, the manifest
    format of tasks/speech/data.py with ``language``, ``voice`` = espeak:<variant> and ``kind: synthetic``)."""
    clips = plan_copies(utterances, share, seed, voices)
    key = hashlib.sha1(json.dumps([VERSION, clips], sort_keys=True).encode()).hexdigest()[:10]
    out = Path(cache_root).expanduser() / f"synthetic-{key}"
    manifest = out / "synthetic.jsonl"
    if manifest.is_file():
        return manifest
    missing = [tool for tool in ("espeak-ng", "sox") if shutil.which(tool) is None]
    if missing:
        raise OSError(f"task.data.fillets.synthetic_share={share:g} needs {' and '.join(missing)} (not found): "
                      f"sudo apt-get install -y espeak-ng sox; or task.data.fillets.synthetic_share=0 to train on "
                      f"the recordings alone")
    wav_dir = out / "wav"
    wav_dir.mkdir(parents=True, exist_ok=True)
    print(f"[speech] synthesising {len(clips)} copies of training transcripts ({len({c['voice'] for c in clips})} "
          f"espeak-ng voices, shared by the languages) into {out}", flush=True)
    synthesise_clips(clips, wav_dir, workers, "[speech] synthetic copies: {done}/{total}", every=250)
    import soundfile
    rows = [{"id": f"synthetic/{c['id']}", "audio": f"wav/{c['id']}.wav", "text": c["text"],
             "duration": round(soundfile.info(str(wav_dir / f"{c['id']}.wav")).duration, 3),
             "language": c["language"], "speaker": f"espeak-{c['variant']}", "voice": f"espeak:{c['variant']}",
             "kind": "synthetic", "copy_of": c["source"]} for c in clips]
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(manifest)  # last and atomically: a half-synthesised folder is never taken as done
    return manifest
