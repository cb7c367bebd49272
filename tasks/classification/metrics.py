"""Accuracy and macro-F1 from SUMMABLE counts, so they stay exact when summed over batches and DDP ranks.

A batch's logging output holds loss_sum, nsentences, correct and, per class c, tp_c / fp_c / fn_c.
"""
from __future__ import annotations

from typing import Dict, Mapping

import torch
from torch import Tensor


def count_logging_output(logits: Tensor, labels: Tensor, loss_sum: float, num_classes: int) -> Dict[str, float]:
    pred = logits.argmax(dim=-1)
    hit = pred == labels
    out = {"loss_sum": float(loss_sum), "nsentences": float(labels.numel()), "correct": float(hit.sum())}
    # per-class counts via bincount: tp = predicted c and right; fp = predicted c and wrong; fn = true c, wrong
    tp = torch.bincount(pred[hit], minlength=num_classes)
    fp = torch.bincount(pred[~hit], minlength=num_classes)
    fn = torch.bincount(labels[~hit], minlength=num_classes)
    for c in range(num_classes):
        out[f"tp_{c}"], out[f"fp_{c}"], out[f"fn_{c}"] = float(tp[c]), float(fp[c]), float(fn[c])
    return out


def reduce_classification(summed: Mapping[str, float], num_classes: int) -> Dict[str, float]:
    """loss (mean per sentence), accuracy and macro_f1 in percent (as the paper's tables).

    Macro-F1 averages F1 over classes that occur in the labels or the predictions of this split; a class
    absent from both carries no information about the classifier and is left out of the mean.
    """
    n = summed.get("nsentences", 0.0)
    if n <= 0:
        return {"loss": float("nan"), "accuracy": float("nan"), "macro_f1": float("nan")}
    f1s = []
    for c in range(num_classes):
        tp, fp, fn = (summed.get(f"{k}_{c}", 0.0) for k in ("tp", "fp", "fn"))
        if tp + fp + fn > 0:
            f1s.append(2 * tp / (2 * tp + fp + fn))
    return {"loss": summed["loss_sum"] / n, "accuracy": 100.0 * summed["correct"] / n,
            "macro_f1": 100.0 * sum(f1s) / len(f1s) if f1s else float("nan")}
