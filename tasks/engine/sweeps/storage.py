"""``hydra.sweeper.storage`` checked before the sweeper makes its sweep dir or opens anything.

Unchecked, a URL SQLAlchemy cannot load ended in a 37-line ``NoSuchModuleError`` after an empty sweep dir
was made, and a relative ``sqlite:///runs/study.db`` quietly created ``runs/`` under whatever directory the
sweep was started from. Accepted: null (in memory), any SQLAlchemy URL whose dialect and driver load
(``sqlite:///study.db``, ``postgresql://...``), or a journal file path; a relative file is relative to the
current directory, and its folder must exist there (an absolute one's folder is created).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from tasks.engine.errors import ConfigError, MissingPackageError

KEY = "hydra.sweeper.storage"


def _check_folder(url: str, file: str) -> None:
    path = Path(file).expanduser()
    if file in ("", ":memory:"):
        raise ConfigError(f"{KEY}={url}: an in-memory database is not shared between workers; use {KEY}=null "
                          f"for one worker, or a file: {KEY}=sqlite:///study.db")
    if not path.is_absolute() and not path.parent.is_dir():
        raise ConfigError(f"{KEY}={url}: the folder {path.parent} does not exist under the current directory "
                          f"{Path.cwd()} (a relative path is relative to where the sweep starts); create it, or "
                          f"give an absolute path ({'sqlite:///' if '://' in url else ''}{path.resolve()})")


def check_storage(url: Optional[str]) -> None:
    """Raise one ConfigError / MissingPackageError naming the fix, unless ``url`` can hold a study."""
    if url is None:
        return
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{KEY}: expected null, a database URL (sqlite:///study.db) or a journal file path, "
                          f"received {url!r}")
    if "://" not in url:
        _check_folder(url, url)  # Optuna's journal file (NFS-safe)
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
        dialect = parsed.get_dialect()
    except NoSuchModuleError:  # (a subclass of ArgumentError)
        raise ConfigError(f"{KEY}={url}: {parsed.drivername!r} is not a database SQLAlchemy knows; use "
                          f"sqlite:///<file>.db, postgresql://..., mysql://..., or a journal file path") from None
    except ArgumentError:
        raise ConfigError(f"{KEY}={url}: not a database URL; expected dialect://..., e.g. sqlite:///study.db or "
                          f"postgresql://user@host/db, or a journal file path without ://") from None
    try:
        dialect.import_dbapi()
    except ImportError as err:
        raise MissingPackageError(f"{KEY}={url}: the {parsed.drivername} driver is not installed ({err}); "
                                  f"install that module (pip), or use sqlite:///<file>.db") from None
    if parsed.get_backend_name() == "sqlite":
        _check_folder(url, parsed.database or "")
