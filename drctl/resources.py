"""Locate the files drctl ships beside its code: `templates/` and `runbooks/`.

In a wheel they live in `drctl/_data/`; in a source checkout (editable install) at the top.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"drctl's {name}/ directory is missing from this installation")


def templates_dir() -> Path:
    return data_dir("templates")


def runbooks_dir() -> Path:
    return data_dir("runbooks")

def cache_dir() -> Path:
    """Where downloaded jars and distributions are kept ($DRCTL_CACHE_DIR, else the XDG cache)."""
    if os.environ.get("DRCTL_CACHE_DIR"):
        return Path(os.environ["DRCTL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "drctl"


@contextmanager
def cache_lock(name: str) -> Iterator[None]:
    """Hold the cache's `name` lock: processes filling one cache entry at once (two labs
    started side by side, test workers) would replace files another one is reading."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with (root / f".{name}.lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file is closed
        yield
