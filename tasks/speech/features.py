"""Acoustic features computed by the project: log-mel filterbanks from torch.stft, CMVN, frame stacking,
SpecAugment.

    logmel = LogMel(sample_rate=16000, n_mels=80, win_ms=25, hop_ms=10)
    feats = logmel(wave)                           # (T, 80), one frame per 10 ms
    feats = cmvn(feats)                            # per utterance: zero mean, unit variance per mel bin
    x = stack_frames(feats, stack=3, skip=3)       # (ceil(T/3), 240): 3x shorter sequences for the RNN
    slower = change_speed(samples, 0.9)            # speed perturbation: 11% longer, pitch 10% lower

The mel filterbank follows the Slaney (Auditory Toolbox) definition by default — linear below 1 kHz,
logarithmic above, each triangle normalised to unit area — which is librosa's default, so the test can
compare it with ``librosa.filters.mel``; ``htk=True`` gives the HTK mel scale.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Optional

import numpy as np

import torch
from torch import Tensor

_F_SP = 200.0 / 3          # Slaney: Hz per mel below 1 kHz
_MIN_LOG_HZ = 1000.0
_MIN_LOG_MEL = _MIN_LOG_HZ / _F_SP
_LOG_STEP = math.log(6.4) / 27.0


def hz_to_mel(hz: Tensor, htk: bool = False) -> Tensor:
    hz = torch.as_tensor(hz, dtype=torch.float64)
    if htk:
        return 2595.0 * torch.log10(1.0 + hz / 700.0)
    linear = hz / _F_SP
    log = _MIN_LOG_MEL + torch.log(torch.clamp(hz, min=_MIN_LOG_HZ) / _MIN_LOG_HZ) / _LOG_STEP
    return torch.where(hz >= _MIN_LOG_HZ, log, linear)


def mel_to_hz(mel: Tensor, htk: bool = False) -> Tensor:
    mel = torch.as_tensor(mel, dtype=torch.float64)
    if htk:
        return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)
    linear = mel * _F_SP
    log = _MIN_LOG_HZ * torch.exp(_LOG_STEP * (mel - _MIN_LOG_MEL))
    return torch.where(mel >= _MIN_LOG_MEL, log, linear)


def mel_filterbank(n_mels: int, n_fft: int, sample_rate: int, fmin: float = 0.0, fmax: Optional[float] = None,
                   htk: bool = False, norm: Optional[str] = "slaney") -> Tensor:
    """(n_mels, n_fft // 2 + 1) triangular filters, equally spaced on the mel scale between fmin and fmax.

    Filter i rises from mel point i to i+1 and falls to i+2 (n_mels + 2 points); norm="slaney" scales
    each to unit area (2 / bandwidth in Hz) so wide high-frequency bands do not dominate.
    """
    fmax = sample_rate / 2.0 if fmax is None else float(fmax)
    if not 0 <= fmin < fmax <= sample_rate / 2.0:
        raise ValueError(f"mel filterbank: expected 0 <= fmin < fmax <= sample_rate/2, received fmin={fmin}, "
                         f"fmax={fmax}, sample_rate={sample_rate}")
    fft_hz = torch.linspace(0, sample_rate / 2.0, n_fft // 2 + 1, dtype=torch.float64)
    mel_points = torch.linspace(float(hz_to_mel(fmin, htk)), float(hz_to_mel(fmax, htk)), n_mels + 2,
                                dtype=torch.float64)
    hz_points = mel_to_hz(mel_points, htk)
    widths = hz_points[1:] - hz_points[:-1]                       # (n_mels + 1,)
    offsets = hz_points.unsqueeze(1) - fft_hz.unsqueeze(0)        # (n_mels + 2, bins)
    rising = -offsets[:-2] / widths[:-1].unsqueeze(1)
    falling = offsets[2:] / widths[1:].unsqueeze(1)
    weights = torch.clamp(torch.minimum(rising, falling), min=0.0)
    if norm == "slaney":
        weights = weights * (2.0 / (hz_points[2:] - hz_points[:-2])).unsqueeze(1)
    elif norm is not None:
        raise ValueError(f"mel filterbank norm: expected 'slaney' or None, received {norm!r}")
    return weights.float()


class LogMel:
    """log(mel filterbank energies + 1e-6) of a Hann-windowed power spectrum; one frame per hop."""

    def __init__(self, sample_rate: int = 16000, n_mels: int = 80, win_ms: float = 25.0, hop_ms: float = 10.0,
                 n_fft: Optional[int] = None):
        self.sample_rate = int(sample_rate)
        self.win_length = int(round(sample_rate * win_ms / 1000.0))  # 400 samples at 16 kHz
        self.hop_length = int(round(sample_rate * hop_ms / 1000.0))  # 160
        self.n_fft = n_fft or 1 << (self.win_length - 1).bit_length()  # next power of two: 512
        if self.n_fft < self.win_length:
            raise ValueError(f"n_fft={self.n_fft} is shorter than the {win_ms} ms window ({self.win_length} samples)")
        self.window = torch.hann_window(self.win_length)
        self.filters = mel_filterbank(n_mels, self.n_fft, self.sample_rate)
        self.n_mels = n_mels

    def num_frames(self, num_samples: int) -> int:
        return num_samples // self.hop_length + 1  # torch.stft with center=True

    def __call__(self, wave: Tensor) -> Tensor:
        wave = torch.as_tensor(wave, dtype=torch.float32)
        if wave.dim() != 1:
            raise ValueError(f"LogMel: expected a mono waveform (samples,), received shape {tuple(wave.shape)}")
        if wave.numel() < self.win_length:  # reflect padding needs more samples than half a window
            wave = torch.nn.functional.pad(wave, (0, self.win_length - wave.numel()))
        spec = torch.stft(wave, self.n_fft, hop_length=self.hop_length, win_length=self.win_length,
                          window=self.window, center=True, pad_mode="reflect", return_complex=True)
        power = spec.real.square() + spec.imag.square()           # (bins, T)
        return torch.log(self.filters @ power + 1e-6).transpose(0, 1).contiguous()  # (T, n_mels)


def change_speed(wave: np.ndarray, factor: float) -> np.ndarray:
    """Speed perturbation (Ko et al. 2015; Kaldi's ``sox speed``): play ``wave`` ``factor`` times as fast,
    tempo and pitch together, by resampling it to ``1 / factor`` of its length (polyphase, scipy)."""
    if factor <= 0:
        raise ValueError(f"task.speed_perturb: expected factors > 0 (e.g. [0.9, 1.0, 1.1]), received {factor}")
    if factor == 1.0:
        return wave
    from scipy.signal import resample_poly

    ratio = Fraction(factor).limit_denominator(100)  # 0.9 -> 9/10: upsample by 10, downsample by 9
    return resample_poly(wave, ratio.denominator, ratio.numerator).astype(np.float32)


def cmvn(feats: Tensor, mean: Optional[Tensor] = None, std: Optional[Tensor] = None) -> Tensor:
    """Mean and variance normalisation per feature dimension: with the utterance's own statistics
    (per-utterance CMVN, removes channel/voice level offsets) or given global ones."""
    if mean is None:
        mean, std = feats.mean(0), feats.std(0, unbiased=False)
    return (feats - mean) / std.clamp_min(1e-5)


def stack_frames(feats: Tensor, stack: int = 3, skip: int = 3) -> Tensor:
    """(T, D) -> (ceil(T / skip), stack * D): output frame t holds input frames t*skip ... t*skip+stack-1
    (the last real frame repeated past the end), so the recurrent encoder runs over `skip`x fewer steps."""
    if stack < 1 or skip < 1:
        raise ValueError(f"task.features.stack / skip: expected integers >= 1, received {stack} / {skip}")
    n = feats.size(0)
    starts = torch.arange(0, n, skip)
    index = (starts.unsqueeze(1) + torch.arange(stack).unsqueeze(0)).clamp_max(n - 1)  # (T', stack)
    return feats[index].reshape(len(starts), stack * feats.size(1))


def spec_augment(x: Tensor, n_mels: int, generator: torch.Generator, freq_masks: int = 2, freq_width: int = 10,
                 time_masks: int = 2, time_width: int = 10) -> Tensor:
    """SpecAugment (Park et al. 2019) without time warping on one stacked utterance (T', stack * n_mels):
    zero ``freq_masks`` bands of up to ``freq_width`` mel bins (the same bins in every stacked frame) and
    ``time_masks`` spans of up to ``time_width`` frames (of the stacked sequence). Features are
    mean-normalised, so zero is the mean."""
    x = x.clone()
    frames = x.view(x.size(0), -1, n_mels)
    for _ in range(freq_masks):
        width = int(torch.randint(0, freq_width + 1, (1,), generator=generator))
        start = int(torch.randint(0, max(1, n_mels - width + 1), (1,), generator=generator))
        frames[:, :, start:start + width] = 0.0
    for _ in range(time_masks):
        width = min(int(torch.randint(0, time_width + 1, (1,), generator=generator)), x.size(0) // 5)
        start = int(torch.randint(0, max(1, x.size(0) - width + 1), (1,), generator=generator))
        frames[start:start + width] = 0.0
    return x
