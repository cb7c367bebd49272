"""The contract every task keeps with the generic trainer (after fairseq, without its size).

A task owns everything specific to one problem: its data per split, its model (a head over a shared
encoder from ``tasks/common/encoders.py``), how a batch turns into a loss, how summed logging outputs turn into
metrics, and (decoding tasks) what an evaluation writes. The trainer (``tasks/engine/training/trainer.py``) owns the rest:
optimizer, schedule, AMP, clipping, accumulation, evaluation cadence, checkpoints, loggers, DDP.

The hooks, in the order the runner and trainer call them::

    check_config()                          before any data is loaded: reject bad task/model keys
    encoder_input_size() -> int | None      the width fed to the shared encoder (from the config alone)
    setup()                                 load / build every split (and vocabularies)
    build_model() -> nn.Module
    num_batches(split, epoch, seed) -> int  this rank's batch count (may change with the epoch's shuffle)
    begin_epoch(epoch) / end_epoch(epoch)   around each training epoch (timing, per-epoch state)
    batches(split, epoch, seed, start)      this rank's batches, from index ``start`` (exact resume)
    compute_loss(model, batch, split) -> (loss, logging_output)          training (and default eval)
    eval_step(model, batch, split) -> (logging_output, records)          evaluation; default: compute_loss
    reduce_metrics(summed_logging_output) -> metrics
    end_eval(split, records, metrics, run_dir) -> extra metrics           rank 0, all ranks' records

Using a trained model (``evaluate.py`` / ``predict.py``, docs/inference.md)::

    inference_state() -> dict               vocabulary, subword model, feature statistics ... (saved in model.pt)
    restore_inference_state(state)          the reverse, before build_model(), with no data loaded
    predict_schema                          predict.py's task options: a dataclass in the task's schema.py
    predict(model, inputs, options, progress) -> results   the one method a task writes for predict.py
    use_options(options)                    evaluate.py's task options (declared ``evaluate=True``), before it scores
    parse_input(line) / read_document(text)  one input line -> input; a whole-file input format -> inputs
    input_warnings(numbered)                inputs that run but may not mean what the user thinks
    format_prediction(result) -> line       one result (or a ``BadInput``) -> its output line
    format_output(lines, results, document) -> text   the whole output (a last line, a file format's own)

Why "summable logging outputs": perplexity = exp(loss_sum / ntokens), accuracy = correct / n, EM, BLEU
statistics, WER edit counts are right only when the *sums* are reduced over batches and DDP ranks before
dividing. So logging outputs hold raw sums (python numbers) and ``reduce_metrics`` divides once.

Loss normalisation. If a logging output carries ``sample_size`` (tokens, frames, sentences), ``loss`` is
a SUM over that many items, and the trainer divides the gradient by the global sum of ``sample_size`` over
all micro-batches and ranks of the optimizer step (fairseq's rule): the update is then the same however a
global batch is cut into micro-batches or processes, and a batch of 3 short utterances weighs less than
one of 30 long ones. Without ``sample_size``, ``loss`` is a mean and is averaged over micro-batches and
ranks (fixed-size batches, where both rules agree).

Records. ``eval_step`` may return per-example records (JSON-able dicts: an answer, a decoded hypothesis, a
transcript). The trainer gathers the records of every rank to rank 0, each exactly once,
and calls ``end_eval`` there with the run directory, where the task writes its predictions file
(``predictions_valid.json``, ``hyp_test.txt`` ...) and may return metrics that need all records at once.
A worked example: docs/adding_a_task.md.
"""
from __future__ import annotations

import importlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import torch
from torch import Tensor, nn

from tasks.engine.run.devices import move_to_device
from tasks.engine.errors import ConfigError
from tasks.engine.config.schema import typed

LoggingOutput = Dict[str, float]
Record = Dict[str, Any]


@dataclass(frozen=True)
class BadInput:
    """predict.py's result for an input line that could not be read (``parse_input`` refused it): its
    number and why, written by ``format_prediction`` in the task's output form."""
    line: int
    error: str


class Task:
    """Base class of a task. Subclasses override the methods that raise ``NotImplementedError``.

    Class attributes a subclass sets:
      name            the config name (``task=<name>``)
      monitor         metric name (a key of ``reduce_metrics``' result) used for best checkpoint,
                      early stopping and as train.py's return value (what sweepers optimise)
      monitor_mode    "min" or "max": whether a smaller or larger ``monitor`` is better
      throughput_key  logging-output key counted for the progress bar's items/s ("ntokens", "nframes",
                      "nsentences")
      causal          True when the model must not see the future (a language model, a decoder): the runner refuses
                      a bidirectional encoder before loading data
      models          the ``model=<name>`` values this task accepts, listed in the error for any other
      schema          the dataclass schema of ``task.*`` (types and ranges; tasks/engine/config/schema.py)
      predict_schema  the dataclass of predict.py's task options (type, range, choices, default, help;
                      tasks/engine/config/command_options.py); None: the task takes none

    ``self.task_cfg`` is ``task.*`` as an instance of ``schema`` (``tasks.engine.config.schema.typed``): tasks read
    ``self.task_cfg.data.level``, never string keys, and ``self.cfg`` stays the plain composed config (the one
    saved with the run).
    """

    name: str = "base"
    monitor: str = "loss"
    monitor_mode: str = "min"
    throughput_key: str = "nsentences"
    causal: bool = False
    models: Tuple[str, ...] = ()
    schema: Optional[type] = None
    predict_schema: Optional[type] = None
    # submodules precision=int8 leaves in float32 where int8 missed the task's quality target (docs/inference.md)
    int8_keep_fp32: Tuple[str, ...] = ()
    # evaluate.py's file=<path>: the task.data.source that reads one file per split, and that file's key
    # (``{split}`` filled in); None: the task scores no file named alone
    scored_file: Optional[Tuple[str, str]] = None

    def __init__(self, cfg: Mapping[str, Any]):
        self.cfg = cfg
        # the splits setup() loads: all three to train; evaluate.py asks for one (the loader sets it)
        self.splits: Tuple[str, ...] = ("train", "valid", "test")
        # True once restore_inference_state() ran: setup() keeps the restored vocabulary instead of building one
        self.restored = False
        self._task_cfg: Any = None  # the typed task.* (task_cfg), built on first use or by check_config

    @property
    def task_cfg(self) -> Any:
        """``task.*`` checked against ``schema`` and built as its instance, once; every path that builds a
        task (train.py's runner, evaluate.py / predict.py's loader, tests, tools) reads the same object.
        A task without a schema gets the section as it is."""
        if self._task_cfg is None:
            self._task_cfg = self._typed_task_cfg()
        return self._task_cfg

    def _typed_task_cfg(self) -> Any:
        if self.schema is None:
            return self.cfg["task"]
        return typed(self.cfg["task"], self.schema, "task", see=f"conf/task/{self.name}.yaml")

    @classmethod
    def file_overrides(cls, path: str, split: str) -> List[str]:
        """The ``task.data`` overrides that make ``split`` exactly the file ``path`` (evaluate.py's file=)."""
        if cls.scored_file is None:
            raise ConfigError(f"file={path}: task={cls.name} scores no data file named alone; use its "
                              f"task.data.* keys (docs/inference.md#evaluatepy)")
        source, key = cls.scored_file
        return [f"task.data.source={source}", f"{key.format(split=split)}={json.dumps(str(path))}"]

    # ---- configuration ------------------------------------------------------------------------
    def check_config(self) -> None:
        """Fail fast, before any data is loaded, on task/model keys this task cannot use.

        The default refuses a ``model=<name>`` outside ``models`` and checks ``task.*`` against the
        task's ``schema``. Tasks extend it with rules across keys (and, over a shared encoder,
        ``tasks.common.encoders.check_encoder_config``).
        """
        model = self.cfg.get("model") if hasattr(self.cfg, "get") else None
        if model is not None and self.models and model.get("name") not in self.models:
            raise ConfigError(f"model={model.get('name')}: task={self.name} accepts model= one of "
                              f"{list(self.models)}")
        if self.schema is not None:  # checked (again: the config may have changed since first use) and typed
            self._task_cfg = self._typed_task_cfg()

    def encoder_input_size(self) -> Optional[int]:
        """Width of the vectors this task feeds its shared encoder (``tasks.common.encoders``), known
        from the config alone (embedding size, stacked feature frames); None when the task builds a model
        of its own instead (an encoder-decoder). Tests and tools build the encoder with it, no data needed."""
        return None

    def encoder_config(self) -> Mapping[str, Any]:
        """The ``model`` config the shared encoder is built from (a task may fix keys, e.g. a reader that
        must be bidirectional)."""
        return self.cfg["model"]

    # ---- data ---------------------------------------------------------------------------------
    def setup(self) -> None:
        """Load / build every split's dataset (and vocabularies). Called once before ``build_model``."""
        raise NotImplementedError

    def num_batches(self, split: str, epoch: int = 0, seed: int = 0) -> int:
        """Number of batches one pass over ``split`` yields on this rank in ``epoch`` under ``seed``.

        Length-bucketed batching makes this depend on the epoch's shuffle; every DDP rank must get the
        same number of training batches (``tasks/common/batching.py`` guarantees it).
        """
        raise NotImplementedError

    def begin_epoch(self, epoch: int) -> None:
        """Before the first training batch of ``epoch`` (not called when a resume starts inside it)."""

    def end_epoch(self, epoch: int) -> None:
        """After the last training step of ``epoch``, before the epoch's validation (if any)."""

    def batches(self, split: str, epoch: int = 0, seed: int = 0, start: int = 0) -> Iterator[Any]:
        """Yield this rank's batches of ``split``.

        For "train" the order must be a pure function of (seed, epoch) so that a run resumed at batch
        index ``start`` of ``epoch`` sees exactly the batches the uninterrupted run would have seen.
        Evaluation splits ignore ``epoch``/``seed``. Tasks that carry state across batches (a language model's hidden state) reset
        it here when ``start == 0``.
        """
        raise NotImplementedError

    # ---- model --------------------------------------------------------------------------------
    def build_model(self) -> nn.Module:
        raise NotImplementedError

    # ---- loss, evaluation and metrics ---------------------------------------------------------
    def compute_loss(self, model: nn.Module, batch: Any, split: str) -> Tuple[Tensor, LoggingOutput]:
        """Return ``(loss, logging_output)``.

        ``logging_output`` holds only SUMMABLE python numbers (loss_sum, ntokens, correct ...). With a
        ``sample_size`` key, ``loss`` is the sum over ``sample_size`` items; without, a mean (see above).
        """
        raise NotImplementedError

    def eval_step(self, model: nn.Module, batch: Any, split: str) -> Tuple[LoggingOutput, List[Record]]:
        """One evaluation batch: summable counts plus per-example records (decoded outputs).

        The default is ``compute_loss``'s logging output and no records. Decoding tasks override it to
        run span decoding / beam search / CTC decoding and return e.g. ``[{"id": ..., "hyp": ...}]``.
        """
        _, logging_output = self.compute_loss(model, batch, split)
        return logging_output, []

    def reduce_metrics(self, summed: LoggingOutput) -> Dict[str, float]:
        """Turn summed logging outputs into metrics. Must include ``self.monitor`` for eval splits."""
        raise NotImplementedError

    def end_eval(self, split: str, records: List[Record], metrics: Dict[str, float],
                 run_dir: Optional[Path]) -> Dict[str, float]:
        """Rank 0, after an evaluation of ``split``: ``records`` of all ranks (each exactly once, in
        rank-then-batch order), the reduced ``metrics``, and the run directory (None when evaluating
        outside a run). Write predictions files here; return extra metrics to merge (default none)."""
        del split, records, metrics, run_dir
        return {}

    # ---- optional hooks -----------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """State needed for an exact resume beyond model/optimizer (e.g. a carried hidden state)."""
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


    # ---- using a trained model (tasks/engine/inference/loader.py) ---------------------------------------
    def inference_state(self) -> Dict[str, Any]:
        """Everything beyond the weights that turns raw input into model input and output into text
        (vocabulary, subword model bytes, feature statistics, a decoding language model): model.pt holds it."""
        return dict(self.state_dict())

    def restore_inference_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``inference_state()`` so that ``build_model`` and ``predict`` work with no data loaded,
        and ``setup`` keeps what was restored. Raise ``KeyError`` naming what is missing (a checkpoint made
        before model.pt): the loader then rebuilds it from the training data with ``setup()``."""
        raise KeyError(f"task={self.name} keeps no inference state")

    def use_options(self, options: Any) -> None:
        """Apply evaluate.py's task options (an instance of ``predict_schema``, only options declared with
        ``evaluate=True`` given) to the evaluation's decoding. A task declaring such an option overrides it."""
        raise NotImplementedError(f"task={self.name} declares an evaluate.py option but no use_options")

    def parse_input(self, line: str) -> Any:
        """One line of predict.py's input -> one input of ``predict``; raise ``ValueError`` for a bad line
        (it is reported with its line number and the other lines still run). Default: the text itself."""
        text = line.rstrip("\n")
        if not text.strip():
            raise ValueError("empty line: one input per line")
        return text

    def predict(self, model: nn.Module, inputs: List[Any], options: Any,
                progress: Callable[[int], None]) -> List[Any]:
        """The results for ``inputs``, in their order (``model`` is in eval mode, under no_grad); ``options``
        is an instance of ``predict_schema`` (its defaults, and what the command line gave), checked.
        Batch as the evaluation does, so the test inputs give exactly the evaluation's outputs;
        call ``progress(n)`` after each batch of n inputs."""
        raise NotImplementedError(f"task={self.name} has no predict hook")

    def input_warnings(self, numbered: List[Tuple[int, Any]]) -> List[str]:
        """predict.py's warnings on ``(line number, input)`` pairs that run but may not mean what the user
        thinks (a line made only of words the vocabulary does not know)."""
        return []

    def read_document(self, text: str) -> Optional[List[Any]]:
        """The inputs of a whole-file input format (a JSON file of questions), or None for one input per line."""
        return None

    def format_prediction(self, result: Any) -> str:
        """One output line of predict.py for one input's result: text as it is, anything else as one JSON
        object, and an input line that could not be read (``BadInput``) as ``{"line", "error"}`` (a task
        writing text gives an empty line instead, so that the output keeps one line per input)."""
        if isinstance(result, BadInput):
            return json.dumps({"line": result.line, "error": result.error}, ensure_ascii=False)
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)

    def format_output(self, lines: List[str], results: List[Any], document: Optional[List[Any]] = None) -> str:
        """predict.py's whole output: ``lines`` (``format_prediction`` of every input line, in input order),
        one per line. A task may add a last line from all ``results`` (a total), and give a whole-file input
        (``document``, as ``read_document`` read it) that format's own output form."""
        del results, document
        return "".join(line + "\n" for line in lines)

    def unknown_share(self, split: str) -> Optional[float]:
        """After ``setup()``: the share of ``split``'s tokens the trained vocabulary does not know (each read
        as ``<unk>``, so a score on them says little); evaluate.py reports it. None: the task cannot tell."""
        return None


def run_seed(cfg: Mapping[str, Any]) -> int:
    """The top-level ``seed`` as the batch order and the tasks' initialisations use it: null (an unseeded
    run, the rule beside it in conf/config.yaml) is 0 there."""
    return 0 if cfg["seed"] is None else int(cfg["seed"])


def unk_fraction(sequences: Iterable[Iterable[int]], unk_id: int) -> float:
    """The share of ``unk_id`` among all ids of ``sequences`` (0.0 when there are none)."""
    total = unknown = 0
    for ids in sequences:
        ids = list(ids)
        total += len(ids)
        unknown += sum(1 for i in ids if i == unk_id)
    return unknown / total if total else 0.0


def sum_logging_outputs(outputs: Iterable[Mapping[str, float]]) -> LoggingOutput:
    """Add logging outputs key by key (the reduction DDP repeats across ranks with all_reduce)."""
    total: LoggingOutput = {}
    for out in outputs:
        for key, value in out.items():
            total[key] = total.get(key, 0.0) + float(value)
    return total


# Tasks by name: ``build_task(cfg)`` imports ``tasks.<cfg.task.name>`` and instantiates its ``TASK``.
#
# Adding a task means adding a folder with an ``__init__.py`` that sets ``TASK`` (and a
# ``conf/task/<name>.yaml``), not editing a table here. The import is by name (a plugin lookup), so the
# engine never imports a task folder's code directly.
TASKS_DIR = Path(__file__).resolve().parents[1]
NOT_TASKS = ("engine", "common", "corpora")


def available_tasks() -> List[str]:
    return sorted(p.parent.name for p in TASKS_DIR.glob("*/__init__.py") if p.parent.name not in NOT_TASKS)


def task_class(name: str) -> type:
    if name not in available_tasks():
        raise ConfigError(f"task.name: expected one of {available_tasks()}, received {name!r}. "
                          f"Pick one with task=<name>.")
    return importlib.import_module(f"tasks.{name}").TASK


def build_task(cfg: Mapping[str, Any]) -> Task:
    return task_class(cfg["task"]["name"])(cfg)
