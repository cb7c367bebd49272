"""Machine translation (Transformer / Transformer+SRU): see README.md in this folder."""
from tasks.translation.task import TranslationTask

TASK = TranslationTask
