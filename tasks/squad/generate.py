"""The old path of ``tasks/corpora/squad_questions.py``, kept while ``scripts/prepare_squad_offline.py``
imports it from here; delete it once scripts/ call the corpora module (issue 42, item 3)."""
from tasks.corpora.squad_questions import prepare_offline  # noqa: F401
