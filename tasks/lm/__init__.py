"""Word- and character-level language modeling (the paper's PTB / enwik8 experiments)."""
from tasks.lm.task import LanguageModelingTask

TASK = LanguageModelingTask
