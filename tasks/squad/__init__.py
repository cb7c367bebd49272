"""SQuAD v1.1 question answering: the DrQA document reader on SRU / LSTM encoders (see task.py)."""

from tasks.squad.task import SquadTask

TASK = SquadTask
