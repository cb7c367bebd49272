"""The old path of ``tasks/corpora/speech_synthesis.py``, kept while ``scripts/prepare_speech_offline.py``
imports it from here; delete it once scripts/ call the corpora module (issue 42, item 3)."""
from tasks.corpora.speech_synthesis import OfflineSpec, prepare_offline_corpus  # noqa: F401
