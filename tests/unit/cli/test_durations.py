"""One duration syntax for every command-line option that takes a duration
(drctl/cli/durations.py)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from drctl.cli.app import main

DURATION_OPTIONS = [
    ["status", "--deadline"],
    ["config", "check", "--deadline"],
    ["failover", "--source-deadline"],
    ["failback", "--deadline"],
    ["failback", "--lookback"],
    ["gap-analysis", "--lookback"],
    ["guard", "--interval"],
    ["translate-offsets", "--source-deadline"],
    ["dump-consumer-timestamps", "--deadline"],
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
