"""Sentence classification: the paper's Table 1 (MR, SUBJ, CR, MPQA, TREC, SST) with SRU / LSTM / CNN."""
from tasks.classification.task import ClassificationTask

TASK = ClassificationTask
