"""failback and reprotect show their plan before they ask (drctl/cli/failback_cmd.py,
reprotect_cmd.py), as failover does: the core hands the preview to `approve` once its
preflight passed, and a refusal ends the command (exit 5) before anything changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from drctl.cli.app import main
from drctl.errors import ExitStatus
from tests.unit.cli.support import unreachable_config

FAILBACK = {"source": "a", "target": "b", "incident": "fo-1", "phase": "failed-over",
            "done": [], "topics": 2, "check_order": True, "reconcile": "copy-safe",
            "groups": ".*", "groups_moved_at_failover": 3, "force": False}
REPROTECT = {"source": "a", "target": "b", "incident": "fo-1", "phase": "failed-back",
             "done": [], "reverse_topics": ["orders"], "connectors": ["mm2-source"],
             "settle_s": 10.0, "force": False}


@pytest.mark.parametrize(("command", "module", "core", "preview", "plan"), [
    ("failback", "drctl.cli.failback_cmd", "run_failback", FAILBACK,
     "Plan: fail back b -> a, incident fo-1 (failed-over)"),
    ("reprotect", "drctl.cli.reprotect_cmd", "run_reprotect", REPROTECT,
     "Plan: return a -> b to protection, incident fo-1 (failed-back)"),
])
def test_the_plan_comes_before_the_question(
        command: str, module: str, core: str, preview: dict[str, Any], plan: str,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    went_on: list[bool] = []

    def fake_core(*args: Any, approve: Any, **kwargs: Any) -> Any:
        approve(dict(preview))  # the preflight passed; not confirmed raises here
        went_on.append(True)
        raise AssertionError("a refusal must end the command")

    monkeypatch.setattr(f"{module}.{core}", fake_core)
    # No --yes and no terminal: the question cannot be answered, so it is refused.
    assert main(["--config", str(unreachable_config(tmp_path)), command]) == ExitStatus.ABORTED
    err = capsys.readouterr().err
    assert plan in err and "both answer" in err
    assert err.index(plan) < err.index("Not confirmed")
    assert went_on == []


def test_the_plan_is_shown_with_yes_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[dict[str, Any]] = []

    def fake_core(*args: Any, approve: Any, **kwargs: Any) -> Any:
        approve(dict(REPROTECT))
        seen.append(REPROTECT)
        raise SystemExit(0)  # what follows the approval is another test's

    monkeypatch.setattr("drctl.cli.reprotect_cmd.run_reprotect", fake_core)
    assert main(["--config", str(unreachable_config(tmp_path)), "reprotect", "--yes"]) == 0
    assert seen and "retire the reverse flow b -> a (1 topic(s))" in capsys.readouterr().err
