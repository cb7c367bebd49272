"""The old path of ``tasks/corpora/librispeech.py``, kept while ``scripts/prepare_librispeech.py`` imports it
from here; delete it once scripts/ call the corpora module (issue 42, item 3)."""
from tasks.corpora.librispeech import write_librispeech_manifest  # noqa: F401
