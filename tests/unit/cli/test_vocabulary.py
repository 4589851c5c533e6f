"""One vocabulary across commands (docs/operations.md, "One vocabulary"): `--dry-run`/`--yes`,
`--source`/`--target`, `--topics REGEX`, `--report-dir DIR`. Old spellings are hidden
aliases for a release: they work, warn on stderr, and together with the new one are exit 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drctl.cli.app import main
from drctl.cli.options import names_regex
from drctl.errors import ExitStatus
from tests.unit.cli.test_json_output import unreachable_config


def _said(err: str) -> str:
    return " ".join(err.split())


# (command, old spelling and value, new spelling and value): the old one reaches the same
# outcome as the new (here: clusters that do not answer, exit 4) and says the new name.
RENAMED = [
    (["translate-offsets", "--dry-run"], ["--from", "a"], ["--source", "a"]),
    (["translate-offsets", "--dry-run"], ["--to", "b"], ["--target", "b"]),
    (["translate-offsets"], ["--apply"], ["--yes"]),
    (["gap-analysis"], ["-t", "orders"], ["--topics", "orders"]),
    (["gap-analysis"], ["--topic", "orders"], ["--topics", "orders"]),
    (["gap-analysis"], ["--out", "gap"], ["--report-dir", "gap"]),
    (["dump-consumer-timestamps"], ["--topic-name", "x"], ["--internal-topic", "x"]),
    (["failover", "--dry-run"], ["--source-deadline", "1s"], ["--deadline", "1s"]),
]


@pytest.mark.parametrize(("command", "old", "new"), RENAMED,
                         ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_an_old_spelling_works_and_says_the_new_one(
        command: list[str], old: list[str], new: list[str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = str(unreachable_config(tmp_path))
    deadline = [] if "--deadline" in new else ["--deadline", "1s"]
    assert main(["--config", config, *command, *new, *deadline]) == ExitStatus.UNREACHABLE
    assert " is now " not in _said(capsys.readouterr().err)
    assert main(["--config", config, *command, *old, *deadline]) == ExitStatus.UNREACHABLE
    assert f"{old[0] if old[0] != '-t' else '--topic'} is now {new[0]}" in \
        _said(capsys.readouterr().err)


@pytest.mark.parametrize(("command", "old", "new"), RENAMED,
                         ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_an_old_and_a_new_spelling_together_are_a_usage_error(
        command: list[str], old: list[str], new: list[str], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(unreachable_config(tmp_path)), *command, *old,
                 *new]) == ExitStatus.USAGE
    name = old[0] if old[0] != "-t" else "--topic"
    assert f"{name} is the old name of {new[0]}: give {new[0]} only." in \
        _said(capsys.readouterr().err)


@pytest.mark.parametrize("command", ["translate-offsets", "gap-analysis",
                                     "dump-consumer-timestamps", "failover"])
def test_help_names_only_the_new_spellings(command: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "-h"]) == 0
    text = capsys.readouterr().out
    for old in ("--from", "--to ", "--apply", "--topic ", "-t,", "--out ", "--topic-name",
                "--source-deadline"):
        assert old not in text, (command, old)
    expected = {"translate-offsets": ["--source CLUSTER", "--target CLUSTER", "--dry-run",
                                      "--yes"],
                "gap-analysis": ["--topics REGEX", "--report-dir DIR"],
                "dump-consumer-timestamps": ["--internal-topic TOPIC", "--topics REGEX"],
                "failover": ["--dry-run", "--report-dir DIR", "--deadline"]}[command]
    assert all(e in text for e in expected), text


def test_translate_offsets_takes_dry_run_or_yes_not_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(unreachable_config(tmp_path))
    assert main(["--config", config, "translate-offsets", "--dry-run", "--yes"]) == \
        ExitStatus.USAGE
    assert "give one of them" in _said(capsys.readouterr().err)
    # The old --apply is --yes: with --dry-run it is the same refusal, after the warning.
    assert main(["--config", config, "translate-offsets", "--dry-run", "--apply"]) == \
        ExitStatus.USAGE
    err = _said(capsys.readouterr().err)
    assert "--apply is now --yes" in err and "give one of them" in err


def test_old_topic_names_are_read_as_exactly_those_topics() -> None:
    regex = names_regex(["orders.v1", "pay(ments)"])
    assert [t for t in ("orders.v1", "ordersXv1", "pay(ments)", "payments", "orders.v1x")
            if re.fullmatch(regex, t)] == ["orders.v1", "pay(ments)"]


def test_runbook_plan_exits_4_when_its_check_cannot_reach_the_target(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Like every command: a cluster that did not answer is 4, not "a check did not hold"."""
    assert main(["--config", str(unreachable_config(tmp_path)), "runbook", "plan",
                 "failover"]) == ExitStatus.UNREACHABLE
    err = _said(capsys.readouterr().err)
    assert "target_reachable" in err and "unreachable" in err
