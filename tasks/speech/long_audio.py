"""Long audio for predict.py, read and transcribed window by window (docs/inference.md#long-audio).

A whole file at once costs memory in proportion to its length at every stage (samples, log-mels, the
encoder's activations, the beam's prefixes), so hours of audio would not fit in memory (docs/inference.md,
"Long audio figures", has the measurements). A file longer than
``LONG_S`` is therefore never loaded whole: it is read in blocks, cut into windows of at most
``WINDOW_S`` seconds, each window ending at the quietest ``QUIET_MS`` of its last ``SEARCH_S`` seconds
(a pause, so that a cut rarely splits a word), and each window is transcribed on its own (its own
utterance normalisation, its own beam) and the texts joined with a space. Memory then depends on the
window, not on the file. Shorter files are transcribed whole, exactly as the evaluation does.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from pathlib import Path
from typing import Iterator

import numpy as np

LONG_S = 60.0      # longer files are transcribed window by window
WINDOW_S = 30.0    # at most this long a window ...
SEARCH_S = 5.0     # ... cut in its last 5 s ...
QUIET_MS = 100     # ... at the 100 ms of least energy
BLOCK_S = 10.0     # read (and checked for NaN) this much at a time


@dataclass(frozen=True)
class LongAudio:
    """A file too long to load whole: where it is and what it holds (read later, window by window)."""
    path: Path
    rate: int
    frames: int

    @property
    def seconds(self) -> float:
        return self.frames / float(self.rate)


def check_long_audio(path: Path, info) -> LongAudio:
    """A long file scanned block by block (never held whole): NaN / inf samples are refused, naming the time."""
    import soundfile

    block = int(BLOCK_S * info.samplerate)
    with soundfile.SoundFile(str(path)) as f:
        for n, samples in enumerate(f.blocks(blocksize=block, dtype="float32", always_2d=True)):
            bad = ~np.isfinite(samples)
            if bad.any():
                at = (n * block + int(np.argmax(bad.any(axis=1)))) / info.samplerate
                raise ValueError(f"{path}: {int(bad.sum())} samples are NaN or infinite (the first at {at:.1f} s); "
                                 f"a damaged or floating-point file out of range (re-encode it, e.g. "
                                 f"`sox {path} -b 16 out.wav`)")
    return LongAudio(Path(path), int(info.samplerate), int(info.frames))


def _resample(mono: np.ndarray, rate: int, sample_rate: int) -> np.ndarray:
    if rate == sample_rate:
        return mono
    from scipy.signal import resample_poly
    g = gcd(int(rate), int(sample_rate))
    return resample_poly(mono, sample_rate // g, int(rate) // g).astype(np.float32)


def quietest_cut(samples: np.ndarray, rate: int) -> int:
    """Where to end a window of ``samples``: the middle of its quietest QUIET_MS in the last SEARCH_S."""
    frame = max(1, int(rate * QUIET_MS / 1000))
    start = max(0, len(samples) - int(SEARCH_S * rate))
    tail = samples[start:]
    n = len(tail) // frame
    if n < 2:
        return len(samples)
    energy = (tail[: n * frame].reshape(n, frame) ** 2).mean(axis=1)
    return start + int(np.argmin(energy)) * frame + frame // 2


def windows(audio: LongAudio, sample_rate: int) -> Iterator[np.ndarray]:
    """Mono windows of the file at ``sample_rate``, in order, each at most WINDOW_S long; together they hold
    every sample of the file once."""
    import soundfile

    limit = int(WINDOW_S * audio.rate)
    pending = np.zeros(0, dtype=np.float32)
    with soundfile.SoundFile(str(audio.path)) as f:
        while True:
            block = f.read(limit - len(pending), dtype="float32", always_2d=True)
            pending = np.concatenate([pending, block.mean(axis=1).astype(np.float32)])
            if len(pending) < limit:  # the end of the file
                if len(pending):
                    yield _resample(pending, audio.rate, sample_rate)
                return
            cut = quietest_cut(pending, audio.rate)
            yield _resample(pending[:cut], audio.rate, sample_rate)
            pending = pending[cut:]
