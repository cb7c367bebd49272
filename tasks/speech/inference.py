"""Speech recognition on a user's own audio files (predict.py, task=speech): read any WAV / FLAC / OGG
(any sample rate, resampled; stereo mixed down), the training's features, the evaluation's batching
and decoding. Also the character LM's plain form for model.pt."""
from __future__ import annotations

from math import gcd
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

from tasks.speech.char_lm import CharNgramLM
from tasks.common.batching import bucket_batches
from tasks.speech.features import LogMel
from tasks.speech.long_audio import LONG_S, LongAudio, check_long_audio, windows


def audio_info(path: str):
    """soundfile's header of the file (duration, rate, frames), or None when it cannot tell (the full read
    then reports what is wrong)."""
    import soundfile

    try:
        return soundfile.info(str(Path(path).expanduser()))
    except Exception:  # noqa: BLE001 - missing, a directory, undecodable: read_audio_file names it
        return None


def read_audio_file(path: str, sample_rate: int) -> Tuple[np.ndarray, float]:
    """Mono float32 samples at ``sample_rate`` and the clip's length in seconds; one clear error for a
    missing, empty or undecodable file."""
    import soundfile

    p = Path(path).expanduser()
    if p.is_dir():
        raise ValueError(f"{p}: a directory, not an audio file; give one audio file per line")
    if not p.is_file():
        raise ValueError(f"{p}: no such audio file")
    try:
        wave, rate = soundfile.read(p, dtype="float32", always_2d=True)
    except Exception as err:  # soundfile's error class differs by version
        raise ValueError(f"{p}: cannot decode audio ({' '.join(str(err).split())[:100]}); give a WAV, FLAC or "
                         f"OGG file, e.g. `sox in.mp3 -r {sample_rate} -c 1 out.wav`") from None
    if wave.shape[0] == 0:
        raise ValueError(f"{p}: the audio file is empty (no samples)")
    mono = wave.mean(axis=1).astype(np.float32)
    if rate != sample_rate:
        from scipy.signal import resample_poly
        g = gcd(int(rate), int(sample_rate))
        mono = resample_poly(mono, sample_rate // g, int(rate) // g).astype(np.float32)
    return mono, wave.shape[0] / float(rate)


def char_lm_state(lm: CharNgramLM) -> Dict[str, Any]:
    """The n-gram counts as plain lists (model.pt loads with weights_only=True)."""
    return {"order": lm.order, "vocab_size": lm.vocab_size,
            "counts": [[list(h), [[label, n] for label, n in nxt.items()]] for h, nxt in lm.counts.items()]}


def char_lm_from_state(state: Mapping[str, Any]) -> CharNgramLM:
    counts = {tuple(h): {int(label): int(n) for label, n in nxt} for h, nxt in state["counts"]}
    return CharNgramLM(int(state["order"]), int(state["vocab_size"]), counts)


def batched_log_probs(model, inputs: List[Tensor], plan: List[List[int]], device: torch.device):
    """(batch indices, log-probs (T, B, V), lengths) per batch of ``plan``, as evaluation computes them."""
    from tasks.common.batching import pad_collate

    for index in plan:
        x, mask_pad, lengths = pad_collate([inputs[i] for i in index], 0.0)
        logits = model(x.to(device), mask_pad.to(device))
        yield index, logits.float().log_softmax(-1), lengths


def read_input(path: str, rate: int, win_ms: float):
    """predict.py's input line (an audio file's path) -> (path, mono samples at ``rate``, seconds); a file
    longer than long_audio.LONG_S -> (path, LongAudio, seconds), read window by window when transcribed."""
    info = audio_info(path)
    if info is not None and info.duration > LONG_S:
        return path, check_long_audio(Path(path).expanduser(), info), float(info.duration)
    wave, seconds = read_audio_file(path, rate)
    if not np.isfinite(wave).all():
        raise ValueError(f"{path}: {int((~np.isfinite(wave)).sum())} samples are NaN or infinite; a damaged or "
                         f"floating-point file out of range (re-encode it, e.g. `sox {path} -b 16 out.wav`)")
    if len(wave) < rate * win_ms / 1000:
        raise ValueError(f"{path}: {len(wave)} samples ({1000 * seconds:.1f} ms), shorter than one feature frame "
                         f"(task.features.win_ms={win_ms} ms): nothing to transcribe")
    return path, wave, seconds


def transcribe(task, model, inputs: List[Any], progress) -> List[Dict[str, Any]]:
    """predict.py's results for ``read_input``'s inputs: ``{"audio", "text", "seconds", "language"}`` (language:
    the one decoded in, for a model with languages). Long files go window by window
    (tasks/speech/long_audio.py), after the others."""
    t = task.task_cfg
    f = t.features
    logmel = LogMel(t.data.sample_rate, f.n_mels, f.win_ms, f.hop_ms)
    short = [i for i, (_, wave, _) in enumerate(inputs) if not isinstance(wave, LongAudio)]
    xs = [task.features_of(inputs[i][1], logmel) for i in short]
    plan = bucket_batches([x.size(0) for x in xs], max_tokens=t.eval_max_frames, max_examples=None)
    device = next(model.parameters()).device
    results: List[Any] = [None] * len(inputs)
    for index, log_probs, lengths in batched_log_probs(model, xs, plan, device):
        for k, (text, language) in zip(index, task.decode_languages(log_probs, lengths, "test")):
            i = short[k]
            results[i] = {"audio": inputs[i][0], "text": text, "seconds": round(inputs[i][2], 3),
                          **({"language": language} if language else {})}
        progress(len(index))
    for i, (path, audio, seconds) in enumerate(inputs):
        if isinstance(audio, LongAudio):
            decoded: List[Tuple[str, Optional[str]]] = []
            for wave in windows(audio, t.data.sample_rate):
                x = task.features_of(wave, logmel)
                for _, log_probs, lengths in batched_log_probs(model, [x], [[0]], device):
                    decoded += task.decode_languages(log_probs, lengths, "test")
            # each window identified alone; the file's language: the one most of its windows were heard in
            languages = [lang for _, lang in decoded if lang]
            results[i] = {"audio": path, "text": " ".join(x for x, _ in decoded if x), "seconds": round(seconds, 3),
                          **({"language": max(set(languages), key=languages.count)} if languages else {})}
            progress(1)
    return results

