"""Schema of ``task=speech`` (conf/task/speech.yaml, its ``task:`` keys): types and ranges; the values
live in the YAML file (see tasks/engine/config/schema.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional

from tasks.engine.config.command_options import CommandOptions, option
from tasks.engine.config.schema import SplitPaths, key
from tasks.speech.decoding import MAX_BEAM

Rate = dict(low=0, high=1, high_open=True)


@dataclass(kw_only=True)
class OfflineSynthConfig:
    clips_per_voice: int = key(low=1)
    sentence_fraction: float = key(low=0, high=1)
    sentence_pool: int = key(low=1)
    seed: int = key(low=0)
    workers: int = key(low=1)


@dataclass(kw_only=True)
class FilletsConfig:
    root: str = key()
    valid_fraction: float = key(**Rate)
    test_fraction: float = key(**Rate)
    seed: int = key(low=0)
    synthetic_share: float = key(low=0, high=1)  # of the training clips, also spoken by shared espeak-ng voices
    synthetic_seed: int = key(low=0)


@dataclass(kw_only=True)
class LibriSpeechConfig:
    root: Optional[str] = key()
    train: str = key()
    valid: str = key()
    test: str = key()


@dataclass(kw_only=True)
class SpeechHubConfig:
    name: Optional[str] = key()
    config: Optional[str] = key()
    splits: Optional[Dict[str, Any]] = key()
    audio_column: str = key()
    text_column: str = key()


@dataclass(kw_only=True)
class SpeechDataConfig:
    source: Literal["fillets", "offline", "manifest", "librispeech", "hub"]
    languages: List[Literal["cs", "nl"]] = key()  # source=fillets: the voice packs' languages
    alphabet: Optional[Literal["en", "cs+nl"]] = key()  # null: cs+nl for fillets, en otherwise
    cache_dir: Optional[str] = key()
    sample_rate: int = key(low=1)
    max_train_seconds: Optional[float] = key(low=0, low_open=True)
    fillets: FilletsConfig = key()
    offline: OfflineSynthConfig = key()
    manifests: SplitPaths = key()
    librispeech: LibriSpeechConfig = key()
    hub: SpeechHubConfig = key()


@dataclass(kw_only=True)
class FeaturesConfig:
    n_mels: int = key(low=1)
    win_ms: float = key(low=0, low_open=True)
    hop_ms: float = key(low=0, low_open=True)
    cmvn: Literal["utterance", "global", "none"] = key()
    stack: int = key(low=1)
    skip: int = key(low=1)
    cache: bool = key()


@dataclass(kw_only=True)
class SpecAugmentConfig:
    freq_masks: int = key(low=0)
    freq_width: int = key(low=0)
    time_masks: int = key(low=0)
    time_width: int = key(low=0)


@dataclass(kw_only=True)
class FrontEndConfig:
    layers: int = key(low=0)          # 1-D convolutions before the encoder (0: none)
    channels: int = key(low=1)
    kernel_size: int = key(low=1)     # odd: the output keeps the input's length


@dataclass(kw_only=True)
class SpeechConfig:
    name: Literal["speech"]
    data: SpeechDataConfig
    features: FeaturesConfig
    spec_augment: SpecAugmentConfig
    speed_perturb: List[float] = key()  # training only: also each utterance at these speeds, one drawn per epoch
    frontend: Optional[FrontEndConfig] = key()
    max_frames: int = key(low=1)
    batch_size: int = key(low=1)
    eval_max_frames: int = key(low=1)
    dropout: float = key(**Rate)
    monitor: Literal["wer", "cer"] = key()  # the validation rate that picks the best checkpoint
    decoder: Literal["greedy", "beam"] = key()  # of the test split (validation is decoded greedily)
    beam_size: int = key(low=1, high=MAX_BEAM)  # decoding.py: the work grows with beam x labels
    lm_order: int = key(low=0)        # decoder=beam: a character n-gram LM of the training transcripts (0: none)
    lm_weight: float = key(low=0.0)  # its weight in the beam's score (shallow fusion)
    lm_bonus: float = key()           # per output character, against the LM's pull towards short outputs


BEAM = ("decoder", "beam")


@dataclass(kw_only=True)
class SpeechPredictOptions(CommandOptions):
    """predict.py's options of a speech model (docs/inference.md#options); None: the trained task's own key."""
    decoder: Optional[Literal["greedy", "beam"]] = option(None, help="greedy, or beam with the character LM")
    beam_size: Optional[int] = option(None, low=1, high=MAX_BEAM, when=BEAM, help="beam width (decoding.py: the "
                                                                                "work grows with beam x labels)")
    lm_weight: Optional[float] = option(None, low=0, when=BEAM, help="the character LM's weight in the beam's "
                                                                     "score")
    # tasks/speech/languages.py: each language's own alphabet and character LM; a model trained on one
    # language, or on a corpus without languages, refuses cs / nl it does not have
    language: Literal["auto", "cs", "nl"] = option("auto", evaluate=True, help="the language spoken: auto "
                                                   "identifies it per utterance; cs / nl decode in that one")
