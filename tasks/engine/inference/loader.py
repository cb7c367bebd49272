"""Load a trained model, from a run directory or from one self-contained model file (``model.pt``).

    trained = load_trained("outputs/runs/2026-12-04/10-00-00_123-ab12")   # checkpoints/best.pt
    trained = load_trained("model.pt")                                       # the file alone, anywhere
    trained.task, trained.model                                              # task restored, model in eval mode

``model.pt`` (written by every run that finishes or stops on a signal, and by
``python predict.py run=<run dir> export=<file>``) holds the best weights, the composed config and the
task's ``inference_state()``: vocabulary, sentencepiece model bytes, feature statistics, a decoding
language model. No optimizer state. The config always comes from the saved file; ``overrides``
(``task.decoding.beam_size=4``, ``task.data.test_file=...``) change it for this use only.
A checkpoint made before model.pt existed lacks the inference state: the loader rebuilds it from the
run's training data with ``task.setup()`` (deterministic, as during training) and says so.
docs/inference.md is the reference.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
import yaml
from omegaconf import DictConfig, OmegaConf
from torch import nn

from tasks.engine.base import Task
from tasks.engine.training.checkpoint import check_same_shapes, save_atomic
from tasks.engine.run.devices import pick_device
from tasks.engine.errors import ConfigError, RunError
from tasks.engine.inference.model_checks import check_finite_weights, check_task_field, refuse_special
from tasks.engine.inference.overrides import check_overrides
from tasks.engine.base import build_task, task_class
from tasks.engine.run.context import apply_process_settings
from tasks.engine.config.saved import fill_added_keys, group_choices
from tasks.engine.config.checks import run_config

MODEL_FORMAT = "sru-experiments/model"
MODEL_VERSION = 1
MODEL_FILE = "model.pt"


class InferenceInputError(RunError, ValueError):
    """A path, checkpoint, option or input line evaluate.py / predict.py cannot use (exit status 2)."""


# Every key write_model_file writes: one missing is a damaged file, said in one line (never a traceback)
MODEL_KEYS = ("format", "version", "task", "config", "model", "inference", "step", "metrics")


def damaged(path: Path, key: str) -> InferenceInputError:
    return InferenceInputError(f"damaged model file: no `{key}` in {path}; re-export with "
                               f"`predict.py run=<run dir> export=<new file>`")


@dataclass
class Trained:
    task: Task
    model: nn.Module
    cfg: DictConfig
    source: Path          # the file the weights came from
    device: torch.device
    step: int
    data_loaded: bool     # True when the loader had to run task.setup() (a checkpoint older than model.pt)


def find_weights(path: Any, checkpoint: str = "best") -> Path:
    """The file to load for ``run=<path>``: a run dir's checkpoints/<checkpoint>.pt (its model.pt when the
    checkpoints are gone), or the file itself."""
    if checkpoint not in ("best", "last"):
        raise InferenceInputError(f"checkpoint={checkpoint}: expected best or last")
    p = Path(str(path)).expanduser()
    if p.is_dir():
        ckpt = p / "checkpoints" / f"{checkpoint}.pt"
        if checkpoint == "best" and is_current_model_file(p / MODEL_FILE, ckpt):
            return p / MODEL_FILE
        if ckpt.is_file():
            return ckpt
        if checkpoint == "best" and (p / MODEL_FILE).is_file():
            return p / MODEL_FILE
        other = "" if checkpoint == "last" or not (p / "checkpoints" / "last.pt").is_file() else \
            " (it has checkpoints/last.pt: pass checkpoint=last)"
        raise InferenceInputError(f"run={p}: no checkpoints/{checkpoint}.pt and no {MODEL_FILE} in this directory"
                                  f"{other}; pass the directory of a train.py run that saved a checkpoint, "
                                  f"or a model file")
    if p.is_file():
        return p
    refuse_special(p)
    raise InferenceInputError(f"run={p}: no such file or directory; pass run=<run dir> (e.g. "
                              f"outputs/runs/<date>/<time>_<id>) or run=<model file> (its model.pt)")


def is_current_model_file(model_file: Path, best: Path) -> bool:
    """The run's model.pt holds its best weights with the whole inference state (a best.pt may lack part of
    it, which would mean rebuilding it from the corpus): used unless best.pt was written after it (a run
    resumed and still training)."""
    if not model_file.is_file():
        return False
    return not best.is_file() or model_file.stat().st_mtime >= best.stat().st_mtime


def read_saved(path: Path) -> Dict[str, Any]:
    """A model file or trainer checkpoint as ``{config, model, inference, step, metrics}``; anything else
    (damaged, foreign, an older layout) is refused in one line saying what it is and what to do."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # truncated zip, garbage bytes, a pickle that is not plain data ...
        reason = " ".join(str(err).split())[:120]
        raise InferenceInputError(f"{path} is damaged or not a PyTorch file ({type(err).__name__}: {reason}); "
                                  f"use the run's other checkpoint (checkpoint=last) or export the model again "
                                  f"(python predict.py run=<run dir> export=<file>)") from None
    if not isinstance(saved, dict):
        raise InferenceInputError(f"{path} holds a {type(saved).__name__}, not a model of this project; pass a "
                                  f"run directory or the model.pt a run wrote")
    if "format" in saved or "inference" in saved:  # a model file (model.pt, export=)
        if "format" in saved and (saved["format"] != MODEL_FORMAT or int(saved.get("version", 0)) > MODEL_VERSION):
            raise InferenceInputError(f"{path} is a {saved['format']} file of version {saved.get('version')}; this "
                                      f"code reads {MODEL_FORMAT} version <= {MODEL_VERSION}: update the package")
        for key in MODEL_KEYS:
            if key not in saved:
                raise damaged(path, key)
        if not isinstance(saved["config"], dict) or not isinstance(saved["config"].get("task"), dict) or \
                "name" not in saved["config"]["task"]:
            raise damaged(path, "config.task.name")
        if not isinstance(saved["inference"], dict):
            raise damaged(path, "inference")
        check_task_field(saved, path)
        return {"config": saved["config"], "model": saved["model"], "inference": saved["inference"],
                "step": int(saved["step"]), "metrics": saved["metrics"], "model_file": True}
    if "model" in saved and "step" in saved and "config" in saved:  # a trainer checkpoint (best.pt / last.pt)
        return {"config": saved["config"], "model": saved["model"], "inference": saved.get("task") or {},
                "step": int(saved["step"]), "metrics": saved.get("metrics", {})}
    if "model" in saved and "step" in saved:
        raise InferenceInputError(f"{path} is a trainer checkpoint of an older layout (no saved config); retrain, "
                                  f"or load its 'model' weights into task.build_model() yourself")
    keys = list(saved)[:6]
    raise InferenceInputError(f"{path} is not a model of this project (keys {keys}); pass a run directory or "
                              f"the model.pt a run wrote (a bare state_dict loads with model.load_state_dict)")


def apply_overrides(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """``key=value`` pairs (values in YAML) set on the saved config; a key it does not have is refused."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InferenceInputError(f"{item!r}: expected key=value")
        if OmegaConf.select(cfg, key, default="<missing>") == "<missing>":
            group = key.rsplit(".", 1)[0]
            known = OmegaConf.select(cfg, group) if "." in key else None
            hint = f"; {group} has {sorted(known)}" if isinstance(known, Mapping) else ""
            raise InferenceInputError(f"{key}: the saved config has no such key{hint}")
        OmegaConf.update(cfg, key, yaml.safe_load(value) if value else None, merge=True)


def complete_saved_config(cfg: DictConfig) -> None:
    """A config saved before conf/ gained a key gets that key (tasks/engine/config/saved.py), so code that
    reads every key directly runs on old runs too; a missing config tree leaves it as saved."""
    try:
        from tasks.engine.config.tree import compose  # Hydra, and the conf/ tree: only here
        current = compose(group_choices(cfg))
    except Exception:  # noqa: BLE001 - no conf/ tree (an unusual install) or a group renamed since
        return
    added = fill_added_keys(cfg, current)
    if added:
        print(f"[load] the saved config predates {len(added)} key(s) of conf/, taken from there: "
              f"{', '.join(added[:5])}{' ...' if len(added) > 5 else ''}", file=sys.stderr, flush=True)


@dataclass
class SavedRun:
    """A trained run read and checked, nothing built yet: its config decides the process settings
    (seed, threads, device) that the model is then built under."""
    task: Task
    cfg: DictConfig
    saved: Dict[str, Any]
    source: Path
    scored_file: Optional[str] = None  # evaluate.py's file=: it replaces the run's own data


def read_trained(path: Any, checkpoint: str = "best", overrides: Sequence[str] = (),
                 expect_tasks: Optional[Sequence[str]] = None, scored_file: Optional[Tuple[str, str]] = None
                 ) -> SavedRun:
    """The saved file and its config (completed, ``overrides`` applied), with the task object built and
    its config checked: every bad path, option or override fails here, before anything is set up.
    ``expect_tasks``: refuse a model of any other task (a tool made for one task). ``scored_file``:
    (path, split), evaluate.py's file=: that split becomes exactly that file, in the task's own keys."""
    weights_path = find_weights(path, checkpoint)
    saved = read_saved(weights_path)
    check_finite_weights(saved["model"], weights_path)
    cfg = OmegaConf.create(saved["config"])
    name = OmegaConf.select(cfg, "task.name")
    if expect_tasks and name not in expect_tasks:
        raise InferenceInputError(f"{weights_path} is a task={name} model; this command needs a "
                                  f"task={' or '.join(expect_tasks)} run")
    complete_saved_config(cfg)
    if scored_file is not None:
        overrides = [*overrides, *file_overrides(name, *scored_file, overrides)]
    trained_cfg = cfg.copy()
    apply_overrides(cfg, overrides)
    check_overrides(trained_cfg, cfg, overrides)
    try:
        task = build_task(cfg)  # the task reads task.* typed (Task.task_cfg): a bad value can fail here already
        task.check_config()
    except ValueError as err:  # ConfigError included: a bad override gets the training's own message
        raise ConfigError(str(err)) from None
    return SavedRun(task=task, cfg=cfg, saved=saved, source=weights_path,
                    scored_file=scored_file[0] if scored_file else None)


def file_overrides(task_name: Any, path: str, split: str, given: Sequence[str]) -> List[str]:
    """evaluate.py's file=<path> as the task's data overrides; the same key given too is refused (which of
    the two files would be scored?)."""
    added = task_class(str(task_name)).file_overrides(path, split)
    keys = {item.partition("=")[0] for item in added[1:]}
    clash = next((item for item in given if item.partition("=")[0] in keys), None)
    if clash is not None:
        raise InferenceInputError(f"file={path} and {clash} both name the {split} file; give one of the two")
    return added


def ask_for_device(run: SavedRun, device: Optional[str]) -> None:
    """A command's ``device=`` option becomes the run context's device; one this machine lacks is refused
    here, before any set-up."""
    if not device:
        return
    try:
        chosen = pick_device(str(device))
        if chosen.type == "mps" and not torch.backends.mps.is_available():
            raise ValueError("mps")
        if chosen.type == "cuda" and chosen.index is not None and chosen.index >= torch.cuda.device_count():
            raise ValueError("cuda index")
    except ValueError:
        raise InferenceInputError(f"device={device}: not available on this machine; pass device=cpu (or "
                                  f"leave device= out for the run's own choice)") from None
    run.cfg.trainer.device = str(device)


def build_trained(run: SavedRun, splits: Optional[Sequence[str]] = None, device: Any = None) -> Trained:
    """The task's inference state restored and the model built, loaded and moved to ``device`` (default: the
    run's ``trainer.device``), in eval mode. Run under the process settings already applied (``open_run``
    or ``apply_process_settings``). ``splits``: the data splits a later ``task.setup()`` will load."""
    task, saved, data_loaded = run.task, run.saved, False
    try:
        task.restore_inference_state(saved["inference"])
        task.restored = True
        if splits:
            task.splits = tuple(splits)
    except KeyError as missing:
        if saved.get("model_file"):
            raise damaged(run.source, f"inference.{missing.args[0] if missing.args else missing}") from None
        print(f"[load] {run.source} was saved before model.pt existed (no {missing} in it): rebuilding the "
              f"vocabulary from the run's training data", file=sys.stderr, flush=True)
        try:
            task.setup()
        except ValueError as err:
            if not run.scored_file:
                raise
            # file= may replace the data source itself (a manifest instead of a corpus), and the training data with it
            raise InferenceInputError(f"{run.source} was saved before model.pt existed, so its vocabulary is "
                                      f"rebuilt from the run's training data, which file={run.scored_file} "
                                      f"replaces ({err}); score the run's own splits (leave file= out), or use "
                                      f"<run>/model.pt (written when the run ends)") from None
        data_loaded = True
    model = task.build_model()
    check_same_shapes(saved["model"], model, run.source)
    model.load_state_dict(saved["model"])
    target = torch.device(device) if device else pick_device(run_config(run.cfg).trainer.device)
    return Trained(task=task, model=model.to(target).eval(), cfg=run.cfg, source=run.source, device=target,
                   step=saved["step"], data_loaded=data_loaded)


def load_trained(path: Any, checkpoint: str = "best", overrides: Sequence[str] = (),
                 splits: Optional[Sequence[str]] = None, device: Optional[str] = None,
                 expect_tasks: Optional[Sequence[str]] = None) -> Trained:
    """The task (vocabulary, subwords, features restored) and its model in eval mode, from ``path``, with the
    run's seed, threads and subnormal flushing applied first (the same numbers as in training). A command
    that opens a run context (evaluate.py, predict.py) calls ``read_trained`` and ``build_trained`` around it."""
    run = read_trained(path, checkpoint, overrides, expect_tasks)
    config = run_config(run.cfg)
    apply_process_settings(config.seed, config.trainer)
    return build_trained(run, splits, device or str(pick_device(config.trainer.device)))


def write_model_file(path: Path, task: Task, config: Mapping[str, Any], weights: Mapping[str, Any],
                     step: int, metrics: Optional[Mapping[str, Any]] = None) -> Path:
    """model.pt: weights + config + the task's inference state, written atomically."""
    payload = {"format": MODEL_FORMAT, "version": MODEL_VERSION, "task": config["task"]["name"],
               "config": config, "model": dict(weights), "inference": task.inference_state(),
               "step": int(step), "metrics": dict(metrics or {})}
    save_atomic(payload, Path(path))
    return Path(path)


def export_run_model(run_dir: Path, task: Task) -> Optional[Path]:
    """At the end of a run (finished, or stopped on a signal): ``<run dir>/model.pt`` from the best
    checkpoint (the last one when no validation has run yet). None when the run saved no checkpoint."""
    checkpoints = Path(run_dir) / "checkpoints"
    source = next((p for p in (checkpoints / "best.pt", checkpoints / "last.pt") if p.is_file()), None)
    if source is None:
        return None
    saved = torch.load(source, map_location="cpu", weights_only=True)
    return write_model_file(Path(run_dir) / MODEL_FILE, task, saved["config"], saved["model"], saved["step"],
                            saved.get("metrics"))
