"""The paper's tables as data: which experiment config reproduces each cell, at which scale, and the
number the paper reports (Lei et al., arXiv 1709.02755, its tables; copied with their sources into
docs/paper_numbers.md; None where the paper's own table could not be read). Used by
``scripts/reproduce.py`` (what to run) and ``scripts/paper_report.py`` (what to compare).

A cell runs ``python train.py experiment=<paper or cpu experiment> seed=<s>``. ``metric`` is a key of the
run's ``results.json`` ``test`` block (valid when a task has no test split), ``mode`` says which direction
is better, ``model`` groups cells for the SRU-vs-baseline statements of the report.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional


@dataclass(frozen=True)
class Cell:
    name: str                      # row label in the report, e.g. "SRU 6x910"
    model: str                     # sru | lstm | cnn | transformer | transformer_sru
    paper: Optional[str]           # experiment for --scale paper (conf/experiment/paper/...)
    cpu: Optional[str]             # experiment for --scale cpu (conf/experiment/cpu/...)
    reported: Optional[float]      # the paper's number for this cell


@dataclass(frozen=True)
class Table:
    key: str
    title: str
    metric: str
    mode: str                      # "min" or "max"
    baseline: str                  # the model the SRU is compared with
    cells: List[Cell]
    note: str = ""


def _classification_cells() -> List[Cell]:
    reported = {"mr": 83.1, "subj": 93.8, "cr": 86.4, "trec": 94.8, "mpqa": None, "sst": 89.6}
    cells = []
    for data, best in reported.items():
        for model, label in (("sru", "SRU 2 layers"), ("sru_4layers", "SRU 4 layers"), ("sru_8layers", "SRU 8 layers"),
                             ("lstm", "LSTM"), ("cnn", "CNN")):
            cpu = f"cpu/classification_mr_{model}" if data == "mr" and model in ("sru", "lstm", "cnn") else None
            cells.append(Cell(f"{data.upper()} {label}", model.split("_")[0], f"paper/classification_{data}_{model}",
                              cpu, best if model == "sru" else None))
    return cells


TABLES: Dict[str, Table] = {t.key: t for t in [
    Table("classification", "Table 1: sentence classification (test accuracy, %)", "accuracy", "max", "lstm",
          _classification_cells(),
          "The paper reports the best SRU per data set (10-fold CV where there is no test split); CPU scale: MR "
          "fold 0 with the offline word2vec vectors, 8 epochs for every model (the 10-fold comparison: "
          "docs/results.md)."),
    Table("squad", "Table 2: SQuAD v1.1 (dev EM / F1)", "f1", "max", "lstm", [
        Cell("SRU 6 layers", "sru", "paper/squad_sru", "cpu/squad_sru", 80.2),
        Cell("LSTM (DrQA)", "lstm", "paper/squad_lstm", "cpu/squad_lstm", 78.8)],
        "CPU scale: the generated questions over gensim's Wikipedia sample, not SQuAD; a 2 x 128 "
        "bidirectional reader (the paper: 6 layers), one epoch over the first 960 training questions (30 "
        "steps) for both units, so this compares equal steps, not equal time (docs/results_squad.md)."),
    Table("lm", "Table 3: Penn Treebank word LM (test perplexity)", "ppl", "min", "lstm", [
        Cell("SRU 6x910", "sru", "paper/ptb_sru", "cpu/ptb_sru", 60.3),
        Cell("SRU 5x980", "sru", "paper/ptb_sru_5x980", None, None),
        Cell("SRU 4x1060", "sru", "paper/ptb_sru_4x1060", None, None),
        Cell("SRU 3x1180", "sru", "paper/ptb_sru_3x1180", None, None),
        Cell("LSTM 6x910", "lstm", "paper/ptb_lstm", "cpu/ptb_lstm", None)],
        "CPU scale: 6 layers x 256, one epoch over a prefix of PTB's training text."),
    Table("lm_char", "enwik8 character LM (test bits per character)", "bpc", "min", "lstm", [
        Cell("SRU 6 layers", "sru", "paper/enwik8_sru", "cpu/enwik8_sru", 1.19),
        Cell("LSTM 6 layers", "lstm", "paper/enwik8_lstm", "cpu/enwik8_lstm", None)],
        "CPU scale: gensim's Wikipedia XML sample instead of enwik8; width 256, batch 32, 300 steps for both."),
    Table("translation", "Table 4: WMT14 English-German (test BLEU)", "bleu", "max", "transformer", [
        Cell("Transformer + SRU", "transformer_sru", "paper/wmt14_transformer_sru", "cpu/translation_transformer_sru",
             28.4),
        Cell("Transformer", "transformer", "paper/wmt14_transformer", "cpu/translation_transformer", None)],
        "The paper: 28.4 with SRU, about +0.7 BLEU over the Transformer (its own number could not be read "
        "here). CPU scale: sentence pairs of the Ding De-En dictionary, a 10-minute training budget for each "
        "model (equal time), far from converged (BLEU < 1): it shows speed, not quality."),
    Table("speech", "Speech recognition (test WER, %)", "wer", "min", "lstm", [
        Cell("SRU", "sru", "paper/speech_sru", "cpu/speech_sru", None),
        Cell("LSTM", "lstm", "paper/speech_lstm", "cpu/speech_lstm", None)],
        "The paper's Switchboard WER could not be read here. CPU scale: synthesised speech, unseen test "
        "voices; a 3 x 128 bidirectional encoder, 15 epochs for both units (equal epochs)."),
]}


def cells_at(table: Table, scale: str) -> List[Cell]:
    """The cells of ``table`` that have an experiment at ``scale`` ("cpu" or "paper")."""
    if scale not in ("cpu", "paper"):
        raise ValueError(f"--scale: expected cpu or paper, received {scale!r}")
    return [c for c in table.cells if getattr(c, scale)]
