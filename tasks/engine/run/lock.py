"""One process owns a run directory at a time: ``<run dir>/run.lock`` holds its pid, host and start time.

    with RunLock(run_dir):      # raises RunLockedError while another live process holds it
        train ...

Why: ``resume=true`` while the run was still training made two processes write the same run directory
(duplicate metric records, two writers of last.pt). The lock is created with O_EXCL (atomic, also on
NFS v3+) and removed on exit. A lock left by a process that died (kill -9, node crash) is stale:
- same host: its pid no longer exists;
- another host (the pid cannot be checked from here): its heartbeat, the file's mtime, which a daemon
  thread of the owner refreshes every ``HEARTBEAT_S`` seconds, is older than ``STALE_AFTER_S``.
A stale lock is taken over with a message; a live one gives an error naming pid, host and the file.

``python train.py`` takes the lock with ``hold_until_exit()`` before Hydra writes anything into the run dir
(tasks/engine/train/run_start.py); the runner's own ``RunLock`` in that process then finds it held and does nothing.
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Dict, Optional

from tasks.engine.errors import RunLockedError

LOCK_NAME = "run.lock"
HEARTBEAT_S = 30.0
STALE_AFTER_S = 600.0
_HELD: Dict[Path, "RunLock"] = {}  # hold_until_exit() locks, by resolved path: a RunLock there is a no-op


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def read_lock(path: Path) -> Optional[Dict[str, Any]]:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # half-written or garbage: judged by its age only


def stale_reason(path: Path, owner: Dict[str, Any]) -> Optional[str]:
    """Why the lock at ``path`` is stale, or None when its owner may still be running."""
    try:
        age = time.time() - Path(path).stat().st_mtime
    except FileNotFoundError:
        return "it was just removed"
    if owner.get("host") == socket.gethostname() and isinstance(owner.get("pid"), int):
        return None if pid_alive(owner["pid"]) else f"process {owner['pid']} no longer exists"
    if age > STALE_AFTER_S:
        return f"its heartbeat is {age:.0f} s old (> {STALE_AFTER_S:.0f} s)"
    return None


class RunLock:
    def __init__(self, run_dir: Path, enabled: bool = True):
        self.path = Path(run_dir) / LOCK_NAME
        self.enabled = enabled
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._nested = False
        self._key = self.path

    def acquire(self) -> None:
        if not self.enabled:
            return
        key = self._key = self.path.resolve()
        if key in _HELD:  # taken earlier by this process (before Hydra wrote the run dir): keep that one
            self._nested = True
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        for _ in range(3):  # a stale lock is removed and the create retried; another taker may win
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                owner = read_lock(self.path)
                if owner is None:
                    continue  # released meanwhile
                reason = stale_reason(self.path, owner)
                if reason is None:
                    raise RunLockedError(
                        f"run directory {self.path.parent} is in use by pid {owner.get('pid')} on host "
                        f"{owner.get('host')} (since {owner.get('started')}; lock {self.path}). Wait for it to "
                        f"finish or stop it (kill -TERM {owner.get('pid')} saves a checkpoint), then resume; "
                        f"if that process is surely gone, delete {self.path}") from None
                print(f"[train] taking over stale lock {self.path} of pid {owner.get('pid')} on "
                      f"{owner.get('host')}: {reason}", flush=True)
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
            self._start_heartbeat()
            return
        raise RunLockedError(f"could not take the lock {self.path}: other processes keep creating it")

    def _start_heartbeat(self) -> None:
        def beat():
            while not self._stop.wait(HEARTBEAT_S):
                with contextlib.suppress(FileNotFoundError):
                    os.utime(self.path)
        self._thread = threading.Thread(target=beat, name="run-lock-heartbeat", daemon=True)
        self._thread.start()

    def release(self) -> None:
        if not self.enabled or self._nested or self._thread is None:
            return
        _HELD.pop(self._key, None)
        self._stop.set()
        owner = read_lock(self.path)
        if owner and owner.get("pid") == os.getpid() and owner.get("host") == socket.gethostname():
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        self._thread = None

    def hold_until_exit(self) -> None:
        """Acquire for the rest of this process (``release_all`` or the process's end gives it back)."""
        self.acquire()
        if self.enabled and not self._nested:
            _HELD[self._key] = self

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def release_all() -> None:
    """Release every lock this process still holds (the end of ``python train.py``, whatever happened)."""
    for lock in list(_HELD.values()):
        lock.release()


atexit.register(release_all)  # a hold_until_exit() lock outlives no process, however it ends
