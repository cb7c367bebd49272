"""``--config-dir`` (``-cd``) checked before Hydra reads it, from the command line itself.

- A YAML syntax error in one of the user's files was Hydra's 89-line ``ParserError``: here it is one line
  naming file, line and column.
- A ``config.yaml`` there was silently ignored: Hydra's search path puts the built-in ``conf/`` first, so
  ``config`` still meant the built-in one and a full default training started. It is refused with the fix:
  rename it and pick it with ``--config-name`` (``defaults: [config, _self_]`` in it starts from ours).
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence

from tasks.engine.errors import ConfigError

FLAGS = {"--config-dir": "dir", "-cd": "dir", "--config-name": "name", "-cn": "name"}


def _flag_values(argv: Sequence[str]) -> dict:
    """{'dir': [...], 'name': [...]} from ``--flag value`` and ``--flag=value`` forms."""
    found: dict = {"dir": [], "name": []}
    args = list(argv)
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in FLAGS:
            given: Optional[str] = value if eq else (args[i + 1] if i + 1 < len(args) else None)
            if given is not None:
                found[FLAGS[flag]].append(given)
    return found


def _yaml_error(path: Path) -> Optional[str]:
    import yaml

    try:
        yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{path}{where}: not valid YAML ({err.problem or err}). Fix the file"
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        return f"{path}: not valid YAML ({' '.join(str(err).split())}). Fix the file"
    return None


def check_config_dirs(argv: Sequence[str]) -> None:
    """Raise one ConfigError for a ``--config-dir`` that Hydra would fail on or silently not use."""
    flags = _flag_values(argv)
    for folder in map(Path, flags["dir"]):
        if not folder.is_dir():
            raise ConfigError(f"--config-dir {folder}: not a directory; give the folder that holds your YAML files")
        if (folder / "config.yaml").is_file() and not flags["name"]:
            raise ConfigError(f"--config-dir {folder} holds a config.yaml, which Hydra ignores: the built-in "
                              f"conf/config.yaml comes first in its search path. Rename yours (e.g. my_config.yaml; "
                              f"'defaults: [config, _self_]' in it starts from the built-in one) and pass "
                              f"--config-name my_config")
        errors: List[str] = [e for e in map(_yaml_error, sorted(folder.rglob("*.yaml"))) if e]
        if errors:
            raise ConfigError(errors[0])
