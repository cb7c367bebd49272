"""Run one configuration end to end: the pipeline behind ``python train.py`` (and ``sru-train``).

    cfg = compose(["task=lm", "model=lstm"])      # the config `python train.py task=lm model=lstm` runs
    summary = run(cfg, run_dir, overrides)        # check -> seed -> task.setup -> fit -> test -> results.json

Importing this module registers the OmegaConf resolvers the configs use (``run_dir``, ``run_id``,
``hydra_subdir``), so scripts and tests compose configs with ``compose()`` instead of importing train.py.
``CONF_DIR`` is the config tree: the checkout's ``conf/`` (editable installs, a clone), else the copy a
regular ``pip install .`` puts under ``<prefix>/share/sru-experiments/conf``, or ``$SRU_CONF_DIR``.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import sys
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from tasks import build_task, distributed
from tasks.checkpoint import load_checkpoint
from tasks.trainer import check_trainer_config, evaluate_best, fit

# One id per process: run folders started in the same second by different processes never collide.
RUN_ID = f"{os.getpid()}-{secrets.token_hex(2)}"
RUN_STAMP = time.strftime("%Y-%m-%d/%H-%M-%S")


def find_conf_dir() -> Path:
    candidates = [os.environ.get("SRU_CONF_DIR"), Path(__file__).resolve().parents[1] / "conf",
                  Path(sys.prefix) / "share" / "sru-experiments" / "conf"]
    for c in candidates:
        if c and (Path(c) / "config.yaml").is_file():
            return Path(c)
    raise FileNotFoundError("no config tree found (conf/config.yaml): set SRU_CONF_DIR=/path/to/conf "
                            "or run from a checkout of the repository")


CONF_DIR = find_conf_dir()


def _is_resume(resume: Any) -> bool:
    return resume not in (None, False, "null", "false", "")


def find_latest_run(runs_dir: str) -> str:
    candidates = sorted(Path(runs_dir).glob("*/*/checkpoints/last.pt"), key=lambda p: p.stat().st_mtime)
    if not candidates:
        raise ValueError(f"resume=true: expected a run with checkpoints/last.pt under {Path(runs_dir).resolve()}, "
                         f"found none. Pass resume=<run dir> or start a new run without resume.")
    return str(candidates[-1].parent.parent)


def resolve_run_dir(resume: Any, runs_dir: str) -> str:
    if not _is_resume(resume):
        return f"{runs_dir}/{RUN_STAMP}_{RUN_ID}"
    if resume is True or str(resume).lower() == "true":
        return find_latest_run(runs_dir)
    if not (Path(str(resume)) / "checkpoints" / "last.pt").is_file():
        raise ValueError(f"resume={resume}: expected a run directory containing checkpoints/last.pt, "
                         f"found none at {Path(str(resume)).resolve()}")
    return str(resume)


OmegaConf.register_new_resolver("run_id", lambda: RUN_ID, replace=True)
OmegaConf.register_new_resolver("run_dir", resolve_run_dir, replace=True)
# A resumed run keeps the original run's .hydra/ and records its own invocation beside it.
OmegaConf.register_new_resolver(
    "hydra_subdir", lambda resume: f".hydra/resume-{RUN_ID}" if _is_resume(resume) else ".hydra", replace=True)


def compose(overrides: Sequence[str] = (), config_dir: Optional[Path] = None) -> DictConfig:
    """The config ``python train.py <overrides>`` would run with (without the hydra node)."""
    from hydra import compose as hydra_compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(config_dir or CONF_DIR), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def config_for_resume(cfg: DictConfig, run_dir: Path, overrides: Sequence[str]) -> DictConfig:
    """The saved run's config, with trainer.* / logger.* overrides from this command line applied."""
    saved = OmegaConf.create(load_checkpoint(run_dir / "checkpoints" / "last.pt")["config"])
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key.split(".")[0] in ("trainer", "logger"):
            OmegaConf.update(saved, key, OmegaConf.select(cfg, key), merge=False)
        elif key != "resume":
            print(f"[train] resume: ignoring override {override!r}; the run continues with its saved config "
                  f"(only trainer.* and logger.* may change)")
    saved.resume = cfg.resume
    return saved


def run(cfg: DictConfig, run_dir: Path, overrides: Sequence[str] = ()) -> Dict[str, Any]:
    """Train + test one configuration in ``run_dir``; return the summary also written to results.json.

    ``overrides`` are the command line's key=value strings (used to pick what may change on resume).
    """
    distributed.setup(cfg.trainer.device)  # under torchrun: join the process group (else a no-op)
    run_dir = Path(distributed.broadcast_run_dir(run_dir))  # every rank uses rank 0's run dir
    resume = _is_resume(cfg.resume)
    if resume:
        cfg = config_for_resume(cfg, run_dir, overrides)
    check_trainer_config(cfg.trainer)
    task = build_task(cfg)
    task.check_config()  # task and model keys, before any data is loaded
    if cfg.seed is not None:  # 0 is a seed too
        seed_everything(int(cfg.seed))
    if cfg.trainer.num_threads:
        torch.set_num_threads(int(cfg.trainer.num_threads))
    config = OmegaConf.to_container(cfg, resolve=True)
    print(f"[train] run dir: {run_dir}", flush=True)

    task.setup()
    result = fit(cfg, task, run_dir, resume=resume, config_to_save=config)

    summary: Dict[str, Any] = {"monitor": result.monitor, "best_valid": result.best_metric, "steps": result.steps,
                               "final_valid": result.final_valid, "train_items_per_s": result.items_per_second,
                               "train_items_per_cpu_s": result.items_per_cpu_second}
    print(f"[train] best valid {result.monitor}: {result.best_metric}", flush=True)
    if cfg.test_after_training:
        test = evaluate_best(cfg, task, result, "test")
        summary["test"] = test
        print(f"[train] test {result.monitor} (best checkpoint): {test[result.monitor]:.4f}", flush=True)
    if distributed.is_main():
        (run_dir / "results.json").write_text(json.dumps(summary, indent=2))
    return summary


def hydra_main(cfg: DictConfig) -> Optional[float]:
    """The body of the Hydra entry point: run one job; in a sweep, record a crash and return the worst value."""
    from hydra.core.hydra_config import HydraConfig

    from tasks.sweep_failures import report_failures

    hydra_cfg = HydraConfig.get()
    with report_failures(lambda: build_task(cfg).monitor_mode) as outcome:
        try:
            distributed.setup(cfg.trainer.device)
            with contextlib.ExitStack() as stack:
                if not distributed.is_main():  # ranks > 0 print nothing (their errors still reach stderr)
                    stack.enter_context(contextlib.redirect_stdout(stack.enter_context(open(os.devnull, "w"))))
                summary = run(cfg, Path(hydra_cfg.runtime.output_dir), hydra_cfg.overrides.task)
        finally:
            distributed.cleanup()
    return outcome.value if outcome.failed else summary["best_valid"]


def prepare_argv() -> None:
    """torchrun starts N copies of the entry point: ranks > 0 must not create Hydra run dirs or logs."""
    sys.argv += distributed.hydra_overrides_for_rank(argv=sys.argv)


def cli() -> None:
    """``sru-train``: the same entry point as ``python train.py`` for installed (non-checkout) users."""
    import hydra

    prepare_argv()
    hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")(hydra_main)()
