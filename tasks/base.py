"""The contract every task keeps with the generic trainer (after fairseq, without its size).

A task owns everything that is specific to one problem: its data per split, its model (a head over a
shared encoder from ``tasks/encoders.py``), how a batch turns into a loss, and how summed logging
outputs turn into metrics. The trainer (``tasks/trainer.py``) owns everything else: optimizer, schedule,
AMP, clipping, accumulation, evaluation cadence, checkpoints, loggers.

Why "summable logging outputs": a metric such as perplexity = exp(loss_sum / ntokens) or accuracy =
correct / nsentences is only right when the *sums* are reduced across batches (and across DDP ranks)
before dividing. So ``compute_loss`` returns raw sums and ``reduce_metrics`` divides once at the end.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import torch
from torch import Tensor, nn

LoggingOutput = Dict[str, float]


class Task:
    """Base class of a task. Subclasses override the methods that raise ``NotImplementedError``.

    Class attributes a subclass sets:
      name            the config name (``task=<name>``)
      monitor         metric name (a key of ``reduce_metrics``' result) used for best checkpoint,
                      early stopping and as train.py's return value (what sweepers optimise)
      monitor_mode    "min" or "max": whether a smaller or larger ``monitor`` is better
      throughput_key  logging-output key counted for the progress bar's items/s ("ntokens" or
                      "nsentences")
    """

    name: str = "base"
    monitor: str = "loss"
    monitor_mode: str = "min"
    throughput_key: str = "nsentences"

    def __init__(self, cfg: Mapping[str, Any]):
        self.cfg = cfg

    # ---- data -------------------------------------------------------------------------------
    def setup(self) -> None:
        """Load / build every split's dataset (and vocabularies). Called once before ``build_model``."""
        raise NotImplementedError

    def splits(self) -> List[str]:
        """Names of the available splits, e.g. ["train", "valid", "test"]."""
        raise NotImplementedError

    def num_batches(self, split: str) -> int:
        """Number of batches one pass over ``split`` yields (for progress bars and epoch bookkeeping)."""
        raise NotImplementedError

    def batches(self, split: str, epoch: int = 0, seed: int = 0, start: int = 0) -> Iterator[Any]:
        """Yield the batches of ``split``.

        For "train" the order must be a pure function of (seed, epoch) so that a run resumed at batch
        index ``start`` of ``epoch`` sees exactly the batches the uninterrupted run would have seen.
        Evaluation splits ignore ``epoch``/``seed``. Tasks that carry state across batches (LM) reset
        it here when ``start == 0``.
        """
        raise NotImplementedError

    # ---- model ------------------------------------------------------------------------------
    def build_model(self) -> nn.Module:
        raise NotImplementedError

    # ---- loss and metrics -------------------------------------------------------------------
    def compute_loss(self, model: nn.Module, batch: Any, split: str) -> Tuple[Tensor, LoggingOutput]:
        """Return ``(loss, logging_output)``.

        ``loss`` is the scalar to back-propagate (usually a mean over the batch). ``logging_output``
        holds only SUMMABLE python numbers (e.g. loss_sum, ntokens, nsentences, correct) so that the
        trainer can add them over batches / ranks and call ``reduce_metrics`` once.
        """
        raise NotImplementedError

    def reduce_metrics(self, summed: LoggingOutput) -> Dict[str, float]:
        """Turn summed logging outputs into metrics. Must include ``self.monitor`` for eval splits."""
        raise NotImplementedError

    # ---- optional hooks ---------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """State needed for an exact resume beyond model/optimizer (e.g. the LM's carried hidden state)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        del state

    def move_to_device(self, batch: Any, device: torch.device) -> Any:
        """Move every tensor in a (nested) batch to ``device``."""
        return move_to_device(batch, device)

    def better(self, new: float, best: Optional[float]) -> bool:
        """True when ``new`` improves on ``best`` under ``monitor_mode``."""
        if best is None or math.isnan(best):
            return not math.isnan(new)
        return new < best if self.monitor_mode == "min" else new > best


def move_to_device(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, dict):
        return {k: move_to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(move_to_device(v, device) for v in obj)
    return obj


def sum_logging_outputs(outputs: Iterable[Mapping[str, float]]) -> LoggingOutput:
    """Add logging outputs key by key (the reduction DDP repeats across ranks with all_reduce)."""
    total: LoggingOutput = {}
    for out in outputs:
        for key, value in out.items():
            total[key] = total.get(key, 0.0) + float(value)
    return total
