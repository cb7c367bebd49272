"""Atomic, self-describing checkpoints.

Writes go to ``<name>.tmp`` and are moved into place with ``os.replace`` (atomic on POSIX), so a crash
or a full disk during a save never destroys the previous good checkpoint. Everything saved is plain
(tensors, numbers, strings, dicts, lists) so loading works with ``torch.load(weights_only=True)``.
"""
from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any, Dict

import numpy as np
import torch


def save_atomic(obj: Dict[str, Any], path: Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def copy_atomic(src: Path, dst: Path) -> None:
    tmp = Path(dst).with_name(Path(dst).name + ".tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def load_checkpoint(path: Path, map_location: Any = "cpu") -> Dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}. Pass resume=<run dir> of a run that "
                                f"saved checkpoints/last.pt, or resume=null to start fresh.")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # truncated zip, garbage bytes, unpickling error ...
        raise RuntimeError(f"checkpoint {path} is corrupted or truncated ({type(err).__name__}: {err}). "
                           f"Resume from another checkpoint (e.g. copy checkpoints/best.pt over last.pt) "
                           f"or start a new run with resume=null.") from None
    if not isinstance(ckpt, dict) or "model" not in ckpt or "step" not in ckpt:
        raise RuntimeError(f"checkpoint {path} is not a trainer checkpoint (expected keys model, step, ...); "
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
