"""The runbooks drctl ships (`runbooks/`), found by name: `drctl runbook validate drill`."""

from __future__ import annotations

from pathlib import Path

from drctl.errors import UsageError
from drctl.resources import runbooks_dir
from drctl.suggest import did_you_mean_aside


def shipped_runbooks() -> dict[str, Path]:
    """Name (the file name without `.yaml`) to path, sorted by name."""
    paths = sorted(runbooks_dir().glob("*.yaml"), key=lambda path: path.stem)
    return {path.stem: path for path in paths}


def runbook_file(file_or_name: str) -> Path:
    """The runbook a command line names: a file if one exists there, else a shipped runbook.

    A file wins, so a runbook of one's own called `drill` is never shadowed."""
    path = Path(file_or_name).expanduser()
    if path.exists():
        return path
    shipped = shipped_runbooks()
    name = file_or_name.removesuffix(".yaml")
    if name in shipped:
        return shipped[name]
    if path.suffix in (".yaml", ".yml") or len(path.parts) > 1:
        raise UsageError(f"{file_or_name}: no such runbook file.", "Check the path.")
    raise UsageError(
        f"'{file_or_name}' is neither a runbook file nor a runbook drctl ships"
        f"{did_you_mean_aside(name, shipped)}.",
        f"Shipped runbooks: {', '.join(shipped)} (`drctl runbook list`).")
