"""Atomic, self-describing checkpoints.

Writes go to ``<name>.tmp`` and are moved into place with ``os.replace`` (atomic on POSIX), so a crash
or a full disk during a save never destroys the previous good checkpoint; a failed write removes its
temporary file and raises one ``CheckpointWriteError`` naming the directory ("no space left ...").
Everything saved is plain (tensors, numbers, strings, dicts, lists) so loading works with
``torch.load(weights_only=True)``.
"""
from __future__ import annotations

import errno
import os
import random
import shutil
from pathlib import Path
from typing import Any, Dict, Mapping

import numpy as np
import torch

from tasks.engine.run import distributed
from tasks.engine.run.interrupts import writing
from tasks.engine.errors import CheckpointReadError, CheckpointWriteError, ResumeError, resume_command


def _is_disk_full(err: BaseException) -> bool:
    """ENOSPC anywhere in the chain, or torch's zip writer's way of saying it ("unexpected pos")."""
    while err is not None:
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "unexpected pos" in str(err) or "No space left" in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def _write_failed(err: BaseException, path: Path) -> CheckpointWriteError:
    directory = path.parent
    try:
        free = f"{shutil.disk_usage(directory).free / 2**20:,.0f} MiB free"
    except OSError:
        free = "free space unknown"
    if _is_disk_full(err):
        what = f"no space left on the device of {directory} ({free})"
        fix = "free space there (or move paths.root to a larger disk)"
    else:
        what = f"{type(err).__name__}: {err}"
        fix = "fix the cause"
    return CheckpointWriteError(
        f"could not write checkpoint {path.name} in {directory}: {what}; the temporary file was removed and "
        f"the previous checkpoints there are intact. To continue: {fix}, then {resume_command(directory.parent)}")


def save_atomic(obj: Dict[str, Any], path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with writing(path.with_name(path.name + ".tmp")) as tmp:  # removed on any exit: never left filling the disk
            with open(tmp, "wb") as f:
                torch.save(obj, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except Exception as err:
        raise _write_failed(err, path) from err


def copy_atomic(src: Path, dst: Path) -> None:
    dst = Path(dst)
    try:
        with writing(dst.with_name(dst.name + ".tmp")) as tmp:
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
    except Exception as err:
        raise _write_failed(err, dst) from err


def check_same_shapes(saved: Mapping[str, Any], model: torch.nn.Module, path: Path) -> None:
    """Refuse a checkpoint whose parameters do not fit ``model`` (another size, another architecture)."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(saved))
    unexpected = sorted(set(saved) - set(expected))
    differing = [f"{k} {tuple(saved[k].shape)} vs {tuple(v.shape)}" for k, v in expected.items()
                 if k in saved and hasattr(saved[k], "shape") and tuple(saved[k].shape) != tuple(v.shape)]
    if not (missing or unexpected or differing):
        return
    parts = []
    if differing:
        parts.append(f"shapes differ (checkpoint vs config): {', '.join(differing[:6])}")
    if missing:
        parts.append(f"missing in the checkpoint: {missing[:6]}")
    if unexpected:
        parts.append(f"not in the config's model: {unexpected[:6]}")
    raise ResumeError(f"checkpoint {path} does not match the model of the run's config: {'; '.join(parts)}. "
                      f"The checkpoint belongs to another run (restore this run's own last.pt) or the config "
                      f"changed (start a new run with resume=null)")


def load_checkpoint(path: Path, map_location: Any = "cpu") -> Dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointReadError(f"checkpoint not found: {path}. Pass resume=<run dir> of a run that "
                                f"saved checkpoints/last.pt, or resume=null to start fresh.")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # truncated zip, garbage bytes, unpickling error ...
        reason = " ".join(str(err).split())[:160]  # torch's own text runs over several lines: its start is enough
        raise CheckpointReadError(f"checkpoint {path} is corrupted or truncated ({type(err).__name__}: {reason}). "
                           f"Resume from another checkpoint (e.g. copy checkpoints/best.pt over last.pt) "
                           f"or start a new run with resume=null.") from None
    if not isinstance(ckpt, dict) or "model" not in ckpt or "step" not in ckpt:
        raise CheckpointReadError(f"checkpoint {path} is not a trainer checkpoint (expected keys model, step, ...); "
                           f"received {type(ckpt).__name__} with keys {list(ckpt)[:8] if isinstance(ckpt, dict) else []}")
    return ckpt


def rng_state() -> Dict[str, Any]:
    """Every RNG the loop touches, in plain types (numpy's state array becomes a tensor)."""
    np_state = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {"name": np_state[0], "keys": torch.from_numpy(np_state[1].astype(np.int64)),
                  "pos": int(np_state[2]), "has_gauss": int(np_state[3]), "gauss": float(np_state[4])},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = state["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def task_state_for_this_rank(ckpt: Mapping[str, Any]) -> Any:
    """This process's task state from a checkpoint (DDP checkpoints hold one per rank, e.g. carried hidden states)."""
    states = ckpt.get("task_per_rank") or [ckpt["task"]]
    world = distributed.get_world_size()
    if len(states) == world:
        return states[distributed.get_rank()]
    if any(s.get("states") if isinstance(s, dict) else s for s in states):
        raise ResumeError(f"checkpoint holds the task state of {len(states)} process(es) but this run has {world}; "
                         f"resume with the same number of processes (torchrun --nproc_per_node={len(states)})")
    return states[0]
