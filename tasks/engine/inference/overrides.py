"""Which ``task.*`` / ``trainer.*`` overrides evaluate.py and predict.py take on a trained model
(docs/inference.md#overrides). Two rules, so that the number printed answers the question asked:
- a data override counts only under its source: ``task.data.files.test=x.csv`` scores x.csv only with
  ``task.data.source=files``. Given under another source it would be ignored and the default split
  scored, so it is refused, naming the source to add (the source is never switched silently: a source
  change has other keys of its own, and the user says which);
- an override that changes what the trained model means (its vocabulary, level, labels, features, shape)
  is refused: the weights were trained for the saved values. Decoding keys, data files and batch sizes
  may change.
"""
from __future__ import annotations

import fnmatch
from typing import Any, Sequence

from omegaconf import OmegaConf

from tasks.engine.errors import ConfigError

# key pattern -> the task.data.source value under which it is read
SOURCE_KEYS = {
    "task.data.files.*": "files", "task.data.train_file": "files", "task.data.valid_file": "files",
    "task.data.test_file": "files", "task.data.file": "file", "task.data.split_fractions": "file",
    "task.data.manifests.*": "manifest", "task.data.librispeech.*": "librispeech", "task.data.hub.*": "hub",
    "task.data.hub_*": "hub", "task.data.hf_*": "hf", "task.data.fillets.*": "fillets",
    "task.data.offline.*": "offline", "task.data.real.*": "real", "task.data.wiki_path": "generated",
}

# keys whose value the weights were trained for (vocabulary, tokens, labels, features, model shape)
MEANING_KEYS = (
    "task.name", "task.data.level", "task.data.max_vocab", "task.data.min_freq", "task.min_freq",
    "task.max_vocab", "task.data.labels", "task.data.lowercase", "task.lowercase", "task.data.alphabet",
    "task.data.sample_rate", "task.data.languages", "task.subwords.*", "task.embedding.*", "task.encoder.*",
    "task.emb_size", "task.tie_weights", "task.features.n_mels", "task.features.win_ms", "task.features.hop_ms",
    "task.features.cmvn", "task.features.stack", "task.features.skip", "task.frontend.*", "task.src_lang",
    "task.tgt_lang", "task.data.text_column", "task.data.label_column",
)


def _matches(key: str, patterns: Any) -> Any:
    return next((p for p in patterns if fnmatch.fnmatchcase(key, p)), None)


def check_overrides(saved: Any, cfg: Any, overrides: Sequence[str]) -> None:
    """``saved``: the config as trained; ``cfg``: with ``overrides`` applied."""
    for item in overrides:
        key = item.partition("=")[0]
        if OmegaConf.select(saved, key, default=None) == OmegaConf.select(cfg, key, default=None):
            continue  # the trained value given again: nothing changes
        if _matches(key, MEANING_KEYS):
            raise ConfigError(f"{item}: changes what the trained model means (it was trained with {key}="
                              f"{OmegaConf.select(saved, key, default=None)}); a trained model is scored and used "
                              f"with its own value. Train a model for {key}={item.partition('=')[2]} instead")
        check_read_by_source(item, cfg, "scored")


def check_read_by_source(item: str, cfg: Any, use: str) -> None:
    """Refuse a data override (``item``) that the config's ``task.data.source`` does not read: the default
    data would be ``use``d (scored, trained on) instead of the file given."""
    pattern = _matches(item.partition("=")[0].lstrip("+"), SOURCE_KEYS)
    source = OmegaConf.select(cfg, "task.data.source", default=None)
    if pattern is not None and source != SOURCE_KEYS[pattern]:
        raise ConfigError(f"{item}: read only with task.data.source={SOURCE_KEYS[pattern]}, and this run's "
                          f"source is {source}: the default data would be {use} instead. Add "
                          f"task.data.source={SOURCE_KEYS[pattern]}")
