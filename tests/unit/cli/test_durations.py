"""One duration syntax for every command-line option that takes a duration
(drctl/cli/durations.py)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from drctl.cli.app import main

# Every command that reaches clusters takes --deadline (drctl/cli/options.py).
DEADLINE_COMMANDS = [["status"], ["check"], ["config", "check"], ["failover"], ["failback"],
                     ["reprotect"], ["translate-offsets"], ["audit"], ["guard"],
                     ["gap-analysis"], ["dump-consumer-timestamps"]]
DURATION_OPTIONS = [
    *([*command, "--deadline"] for command in DEADLINE_COMMANDS),
    ["failback", "--lookback"],
    ["gap-analysis", "--lookback"],
    ["guard", "--interval"],
]


def _said(err: str) -> str:
    """Typer's error box without its frame and line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", err).split())


@pytest.mark.parametrize("command", DURATION_OPTIONS, ids=" ".join)
def test_a_duration_option_refuses_what_is_not_a_duration(
        command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "soon"]) == 2
    said = _said(capsys.readouterr().err)
    assert f"Invalid value for '{command[-1]}': 'soon' is not a duration" in said
    assert "e.g. 90s, 500ms, 15m, 6h, 2d, or a number of seconds" in said


@pytest.mark.parametrize("command", DURATION_OPTIONS, ids=" ".join)
def test_a_duration_option_says_so_in_its_help(
        command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command[:-1], "--help"]) == 0
    help_text = _said(capsys.readouterr().out)
    assert re.search(re.escape(command[-1]) + r" +DURATION", help_text), help_text


def test_guard_interval_has_a_floor(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["guard", "--interval", "100ms"]) == 2
    assert "'100ms' is shorter than the minimum, 0.5 s" in _said(capsys.readouterr().err)


@pytest.mark.parametrize("deadline", ["1500ms", "1.5s", "1.5"])
def test_a_deadline_in_any_form_bounds_the_command(
        deadline: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "drctl.yaml"
    # Port 9 on loopback: nothing listens there.
    cfg.write_text("clusters:\n  gone: {bootstrap.servers: '127.0.0.1:9'}\n"
                   "retry: {initial_s: 0.2}\n")
    started = time.monotonic()
    assert main(["--config", str(cfg), "config", "check", "--deadline", deadline]) == 4
    assert time.monotonic() - started < 10
    assert "did not answer" in capsys.readouterr().err


@pytest.mark.parametrize("command", DEADLINE_COMMANDS, ids=" ".join)
def test_one_deadline_one_meaning_one_default(
        command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--help"]) == 0
    help_text = _said(capsys.readouterr().out)
    assert "--deadline DURATION How long to retry each cluster (and Kafka Connect) before " \
           "calling it unreachable:" in help_text
    default = "5s" if command == ["status"] else "30s"  # status says why it is shorter
    assert f"[default: {default}]" in help_text.split("--deadline", 1)[1]
    assert "--source-deadline" not in help_text


def _flow(tmp_path: Path) -> Path:
    cfg = tmp_path / "drctl.yaml"
    # Port 9 on loopback: nothing listens there.
    cfg.write_text("clusters:\n  a: {bootstrap.servers: '127.0.0.1:9'}\n"
                   "  b: {bootstrap.servers: '127.0.0.1:9'}\n"
                   "replication: {kind: mirrormaker2, source: a, target: b}\n"
                   f"state: {{dir: '{tmp_path / 'state'}'}}\n"
                   "retry: {initial_s: 0.2}\n")
    return cfg


@pytest.mark.parametrize("command", ["failover", "translate-offsets"])
def test_the_old_source_deadline_still_works_for_a_release_with_a_warning(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    status = main(["--config", str(_flow(tmp_path)), command, "--source-deadline", "1",
                   "--yes"] if command == "failover" else
                  ["--config", str(_flow(tmp_path)), command, "--source-deadline", "1"])
    assert status == 4  # the target does not answer
    assert time.monotonic() - started < 10  # the old flag's value is the deadline
    err = _said(capsys.readouterr().err)
    assert "--source-deadline is now --deadline; the old name goes in the next release" in err


def test_the_old_and_the_new_deadline_together_are_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(_flow(tmp_path)), "translate-offsets", "--deadline", "1",
                 "--source-deadline", "1"]) == 2
    assert "--source-deadline is the old name of --deadline: give --deadline only." in \
        _said(capsys.readouterr().err)
