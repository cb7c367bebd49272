"""Speech recognition on a user's own audio files (predict.py, task=speech): read any WAV / FLAC / OGG
(any sample rate, resampled; stereo mixed down), the training's features, the evaluation's batching
and decoding. Also the character LM's plain form for model.pt."""
from __future__ import annotations

from math import gcd
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np
import torch
from torch import Tensor

from tasks.speech.char_lm import CharNgramLM


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
