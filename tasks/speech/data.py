"""Speech data: manifests (jsonl / tsv of audio path, duration, transcript), audio reading with soundfile,
and the corpus sources a run can use.

Manifest formats (one utterance per line; relative audio paths are relative to the manifest's folder):

    train.jsonl   {"audio": "wav/a.wav", "duration": 1.9, "text": "three one four", "id": "a", "speaker": "s1"}
                  (NeMo's "audio_filepath" and "transcript"/"sentence" are accepted too)
    train.tsv     header line "audio<TAB>duration<TAB>text" (optional columns id, speaker), then one row each

Sources (task.data.source):
    fillets       recorded Czech/Dutch voice acting of the Fish Fillets NG voice packs (tasks/corpora/fillets_speech.py),
                  prepared on first use, split by level; task.data.languages picks cs, nl or both — the default
    offline       the synthesised corpus (tasks/corpora/speech_synthesis.py), prepared on first use
    manifest      task.data.manifests.{train,valid,test}: your manifests
    librispeech   task.data.librispeech.root: a LibriSpeech folder (*.trans.txt + .flac); manifests written
                  once into the cache (python -m tasks.corpora.librispeech does the same from the shell)
    hub           task.data.hub.name: a Hugging Face speech set (needs network or a local cache)
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Mapping, Optional, Union

import numpy as np
import torch

from tasks.engine.errors import not_a_file
from tasks.corpora.fillets_speech import LANGUAGES, FilletsSpec, describe, prepare_fillets_corpus
from tasks.corpora.librispeech import write_librispeech_manifest
from tasks.corpora.speech_synthesis import default_cache_dir
from tasks.speech.features import LogMel, change_speed
from tasks.speech.schema import FeaturesConfig, SpeechDataConfig, SpeechHubConfig
from tasks.corpora.speech_synthesis import OfflineSpec, prepare_offline_corpus
from tasks.corpora.synthetic_copies import prepare_copies

SPLITS = ("train", "valid", "test")
SOURCES = ("fillets", "offline", "manifest", "librispeech", "hub")
_AUDIO_KEYS = ("audio", "audio_filepath", "path")
_TEXT_KEYS = ("text", "transcript", "sentence")


@dataclass
class Utterance:
    id: str
    audio: Union[Path, bytes]   # a file, or encoded audio bytes (hub sets)
    text: str
    duration: Optional[float] = None
    speaker: Optional[str] = None
    voice: Optional[str] = None  # the synthetic corpus: "engine:voice"
    kind: Optional[str] = None   # the synthetic corpus: "digits" | "sentence"
    language: Optional[str] = None  # e.g. "cs" / "nl" (the voice-pack corpus): metrics per language
    where: str = ""              # manifest file and line, for error messages


def _pick(row: Mapping[str, Any], keys, where: str, what: str) -> Any:
    if not isinstance(row, Mapping):  # a JSON line that is a list, a string, a number
        raise ValueError(f"{where}: a JSON {type(row).__name__}, not an object; a manifest line is one object "
                         f"with audio, duration and text, e.g. {{\"audio\": \"a.wav\", \"duration\": 1.2, "
                         f"\"text\": \"one two\"}}")
    for key in keys:
        if row.get(key) not in (None, ""):
            return row[key]
    empty = next((key for key in keys if row.get(key) == ""), None)
    if empty is not None:  # the field is there: say what is wrong with it, not that it is missing
        raise ValueError(f"{where}: {empty} is empty; every manifest line needs its {what} (an utterance "
                         f"with nothing to score has no place in a manifest: leave the line out)")
    raise ValueError(f"{where}: no {what} field (expected one of {list(keys)}); a manifest line needs "
                     f"audio, duration and text, e.g. {{\"audio\": \"a.wav\", \"duration\": 1.2, \"text\": \"one two\"}}")


def read_manifest(path: Union[str, Path]) -> List[Utterance]:
    """Utterances of a .jsonl or .tsv manifest, with errors naming the file and line."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise not_a_file(path, "speech manifest", "Set task.data.manifests.<split> to an existing .jsonl or .tsv "
                         "file, or use task.data.source=offline")
    if path.suffix not in (".jsonl", ".tsv"):
        raise ValueError(f"{path}: expected a .jsonl or .tsv manifest, received a {path.suffix or 'suffix-less'} file")
    with open(path, encoding="utf-8", newline="") as f:
        if path.suffix == ".jsonl":
            rows = []
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rows.append((n, json.loads(line)))
                    except json.JSONDecodeError as err:
                        raise ValueError(f"{path}:{n}: not valid JSON ({err.msg}); one JSON object per line") from None
        else:
            reader = csv.DictReader(f, delimiter="\t")
            if reader.fieldnames and not set(reader.fieldnames) & set(_AUDIO_KEYS):
                raise ValueError(f"{path}:1: {reader.fieldnames} is not a header naming the columns; a .tsv manifest "
                                 f"starts with one, e.g. audio<TAB>duration<TAB>text (the audio column one of "
                                 f"{list(_AUDIO_KEYS)})")
            rows = [(n + 1, r) for n, r in enumerate(reader, 1)]
    out = []
    for n, row in rows:
        where = f"{path}:{n}"
        audio = Path(str(_pick(row, _AUDIO_KEYS, where, "audio path"))).expanduser()
        audio = audio if audio.is_absolute() else path.parent / audio
        duration = row.get("duration")
        out.append(Utterance(id=str(row.get("id") or audio.stem), audio=audio,
                             text=str(_pick(row, _TEXT_KEYS, where, "transcript")),
                             duration=float(duration) if duration not in (None, "") else None,
                             speaker=row.get("speaker"), voice=row.get("voice"), kind=row.get("kind"),
                             language=row.get("language"), where=where))
    if not out:
        raise ValueError(f"{path}: the manifest has no utterances")
    return out


def load_audio(utt: Utterance, sample_rate: int) -> np.ndarray:
    """Mono float32 samples at ``sample_rate``; a missing, undecodable or wrongly sampled file is one clear
    error naming the file (and the manifest line it came from)."""
    import soundfile

    src = f"{utt.audio}" if isinstance(utt.audio, Path) else f"utterance {utt.id}"
    origin = f" (listed at {utt.where})" if utt.where else ""
    if isinstance(utt.audio, Path) and not utt.audio.is_file():
        raise FileNotFoundError(f"audio file not found: {utt.audio}{origin}; fix the path in the manifest "
                                f"(relative paths are relative to the manifest's folder)")
    try:
        wave, sr = soundfile.read(utt.audio if isinstance(utt.audio, Path) else io.BytesIO(utt.audio),
                                  dtype="float32", always_2d=True)
    except Exception as err:  # soundfile raises LibsndfileError / RuntimeError / TypeError by version
        raise ValueError(f"cannot decode audio {src}{origin}: {err}. The file is corrupt or not in a format "
                         f"libsndfile reads (wav, flac, ogg); re-create it, e.g. `sox in.mp3 -r {sample_rate} "
                         f"-c 1 out.wav`") from None
    if sr != sample_rate:
        raise ValueError(f"audio {src}{origin}: sample rate {sr} Hz, expected {sample_rate} Hz "
                         f"(task.data.sample_rate). Resample it (`sox in.wav -r {sample_rate} out.wav`) or set "
                         f"task.data.sample_rate={sr}")
    if wave.shape[0] == 0:
        raise ValueError(f"audio {src}{origin}: the file holds no samples")
    return wave.mean(axis=1) if wave.shape[1] > 1 else wave[:, 0]


def split_log_mels(split: str, utts: List[Utterance], data: SpeechDataConfig, f: FeaturesConfig,
                   speed: float = 1.0) -> List[torch.Tensor]:
    """Log-mel features of every utterance of a split (played ``speed`` times as fast), from the feature cache
    (``<cache>/features/<hash>.pt``, keyed by the files' sizes and times and the settings) when the same files
    were seen; ``f``: task.features."""
    logmel = LogMel(data.sample_rate, f.n_mels, f.win_ms, f.hop_ms)
    cache_file = None
    if f.cache and all(isinstance(u.audio, Path) for u in utts):
        stamp = [(str(u.audio), u.audio.stat().st_size, u.audio.stat().st_mtime_ns) for u in utts if u.audio.is_file()]
        if len(stamp) == len(utts):  # a missing file gets its clear error below, not a cache miss
            settings = [stamp, data.sample_rate, f.n_mels, f.win_ms, f.hop_ms]
            key = hashlib.sha1(json.dumps(settings + ([speed] if speed != 1.0 else [])).encode()).hexdigest()[:16]
            root = data.cache_dir if data.cache_dir is not None else default_cache_dir()  # null: the YAML's rule
            cache_file = Path(root).expanduser() / "features" / f"{key}.pt"
            if cache_file.is_file():
                return torch.load(cache_file)
    feats, t0 = [], time.time()
    for i, utt in enumerate(utts):
        feats.append(logmel(torch.from_numpy(change_speed(load_audio(utt, data.sample_rate), speed))))
        if (i + 1) % 500 == 0 or i + 1 == len(utts):  # progress with an ETA
            rate = (i + 1) / max(time.time() - t0, 1e-9)
            played = f" at speed {speed:g}" if speed != 1.0 else ""
            print(f"[speech] {split}: log-mel features{played} of {i + 1}/{len(utts)} utterances "
                  f"(ETA {(len(utts) - i - 1) / rate:.0f}s)", flush=True)
    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_suffix(".tmp")
        torch.save(feats, tmp)
        tmp.replace(cache_file)
    return feats


def _hub_split(hub: SpeechHubConfig, split: str) -> List[Utterance]:
    """A Hugging Face speech set: audio bytes decoded by soundfile (not by datasets' audio backends)."""
    try:
        import datasets
    except ImportError:
        raise ImportError("task.data.source=hub needs the `datasets` package: pip install datasets") from None
    name = hub.splits[split]
    try:
        ds = datasets.load_dataset(hub.name, hub.config, split=name)
    except Exception as err:
        raise RuntimeError(f"task.data.hub: loading {hub.name!r} (config {hub.config!r}, split {name!r}) "
                           f"failed: {err}. It needs network access or a local cache; offline, use "
                           f"task.data.source=offline or manifest") from None
    audio_col, text_col = hub.audio_column, hub.text_column
    for col in (audio_col, text_col):
        if col not in ds.column_names:
            raise ValueError(f"task.data.hub: {hub.name} split {name} has columns {ds.column_names}, "
                             f"no {col!r}; set task.data.hub.audio_column / text_column")
    ds = ds.cast_column(audio_col, datasets.Audio(decode=False))
    out = []
    for i, row in enumerate(ds):
        audio = row[audio_col]
        data = audio.get("bytes") or Path(audio["path"])
        out.append(Utterance(id=str(row.get("id", i)), audio=data, text=row[text_col],
                             speaker=str(row["speaker_id"]) if "speaker_id" in row else None,
                             where=f"{hub.name}[{name}][{i}]"))
    return out


def _fillets_split(data: SpeechDataConfig, cache: Path, split: str) -> List[Utterance]:
    f, languages = data.fillets, list(data.languages or LANGUAGES)  # []: both (conf/task/speech.yaml)
    unknown = [lang for lang in languages if lang not in LANGUAGES]
    if unknown:
        raise ValueError(f"task.data.languages: {unknown} not in the voice packs; expected a subset of "
                         f"{list(LANGUAGES)}, e.g. task.data.languages=[cs]")
    spec = FilletsSpec(root=str(f.root), valid_fraction=float(f.valid_fraction),
                       test_fraction=float(f.test_fraction), seed=int(f.seed))
    manifests, stats = prepare_fillets_corpus(cache, spec)
    if split == "train":  # once per run: where the manifests are and how many hours each split holds
        print(describe(manifests, stats, languages), flush=True)
    utts = [u for u in read_manifest(manifests[split]) if u.language in languages]
    if split == "train" and f.synthetic_share > 0:  # copies in voices both languages share (training only)
        utts += read_manifest(prepare_copies(utts, f.synthetic_share, f.synthetic_seed, cache))
    return utts


def load_split_utterances(data: SpeechDataConfig, split: str) -> List[Utterance]:
    """The utterances of ``split`` from the configured source (offline data prepared on first use);
    ``data``: task.data, typed (the task's ``task_cfg.data``)."""
    source = data.source
    # null: $SRU_DATA_DIR/speech or ~/.cache/sru-experiments/speech (the rule beside it in the YAML)
    cache = Path(data.cache_dir if data.cache_dir is not None else default_cache_dir()).expanduser()
    if source == "fillets":
        return _fillets_split(data, cache, split)
    if source == "offline":
        o = data.offline
        spec = OfflineSpec(clips_per_voice=int(o.clips_per_voice), sentence_fraction=float(o.sentence_fraction),
                           sentence_pool=int(o.sentence_pool), seed=int(o.seed))
        return read_manifest(prepare_offline_corpus(cache, spec, workers=o.workers)[split])
    if source == "manifest":
        path = getattr(data.manifests, split)
        if not path:
            raise ValueError(f"task.data.source=manifest: task.data.manifests.{split} is not set; give a .jsonl "
                             f"or .tsv manifest per split (train, valid, test)")
        return read_manifest(path)
    if source == "librispeech":
        ls = data.librispeech
        if not ls.root:
            raise ValueError("task.data.source=librispeech: set task.data.librispeech.root to the folder holding "
                             "train-clean-100/, dev-clean/, test-clean/ (the LibriSpeech layout)")
        part = getattr(ls, split)
        manifest = cache / "librispeech" / f"{part}.jsonl"
        if not manifest.is_file():
            write_librispeech_manifest(Path(ls.root).expanduser() / part, manifest)
        return read_manifest(manifest)
    if source == "hub":
        return _hub_split(data.hub, split)
    raise ValueError(f"task.data.source: expected one of {list(SOURCES)}, received {source!r}")
