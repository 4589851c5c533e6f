"""The root command (drctl/cli/app.py): --version and --help (-h, at 80 columns), global
options anywhere on the line, usage errors, the JSON error document, DRCTL_DEBUG, and the mode
choices the commands' help lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from typer.testing import CliRunner

from drctl import __version__
from drctl.cli.app import app, hoist_global_options, main
from drctl.errors import ExitStatus


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    lines = dict(line.split(" ", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["drctl"] == __version__
    assert lines["confluent-kafka"] == confluent_kafka.version()
    assert lines["librdkafka"] == confluent_kafka.libversion()[0]
    assert set(lines) == {"drctl", "python", "confluent-kafka", "librdkafka", "pyspark", "java"}
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "lab" in out and "config" in out


def test_unknown_option_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "up", "--no-such-option"]) == 2
    assert "No such option" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "traceback"), [("0", False), ("false", False), ("", False),
                                                  ("1", True), ("yes", True)])
def test_drctl_debug_is_read_as_a_boolean(value: str, traceback: bool, tmp_path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    monkeypatch.setenv("DRCTL_DEBUG", value)
    try:
        assert main(["lab", "status", "--dir", str(tmp_path)]) == 1
    finally:  # debug mode configures the root logger: leave it as it was for other tests
        root.setLevel(level)
        root.handlers[:] = handlers
    assert ("Traceback" in capsys.readouterr().err) is traceback


def _help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_help_lists_the_mode_choices() -> None:
    assert "copy-safe|quarantine|none" in _help("failback")
    methods = "auto|exact|timestamp|checkpoint|identity"
    assert methods in _help("translate-offsets")
    assert methods in _help("failover")


@pytest.mark.parametrize(("argv", "expected"), [
    (["status", "--config", "f.yaml", "-q"], ["--config", "f.yaml", "-q", "status"]),
    (["failover", "--debug", "--yes"], ["--debug", "failover", "--yes"]),
    (["-o", "json", "config", "show", "-c", "x"], ["-o", "json", "-c", "x", "config", "show"]),
    (["status", "--output=json"], ["--output=json", "status"]),
    # What follows `--` is not drctl's to read.
    (["runbook", "run", "r.yaml", "--", "-q"], ["runbook", "run", "r.yaml", "--", "-q"]),
])
def test_global_options_are_moved_before_the_command(argv: list[str],
                                                     expected: list[str]) -> None:
    assert hoist_global_options(argv) == expected


def test_global_options_after_the_subcommand_are_taken(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    assert main(["status", "--config", str(missing), "-q"]) == ExitStatus.USAGE
    err = capsys.readouterr().err
    assert "No such option" not in err and "no configuration file here" in err


@pytest.mark.parametrize("argv", [["-h"], ["status", "-h"], ["runbook", "run", "-h"]])
def test_dash_h_is_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitStatus.SUCCESS
    assert "Usage: drctl" in capsys.readouterr().out


def test_an_error_in_json_mode_is_a_json_document_on_stdout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    assert main(["-o", "json", "status", "--config", str(missing)]) == ExitStatus.USAGE
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert error["exit_status"] == 2 and error["kind"] == "ConfigError"
    assert "no configuration file here" in error["message"] and "drctl lab up" in error["hint"]
    assert "no configuration file here" in err  # and still said on stderr


def _command_paths() -> list[list[str]]:
    import typer

    from drctl.cli.app import app

    paths: list[list[str]] = []

    def walk(cmd: Any, path: list[str]) -> None:
        paths.append(path)
        for name, sub in getattr(cmd, "commands", {}).items():  # a group's commands
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "drctl")
def test_help_reads_at_80_columns(path: list[str], monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*path, "-h"]) == ExitStatus.SUCCESS
    text = capsys.readouterr().out
    assert "Usage: drctl" in text
    too_wide = [line for line in text.splitlines() if len(line) > 80]
    assert not too_wide
    assert "<bool>" not in text and not set("│╭╰─") & set(text)


def test_choices_are_never_split_across_lines(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["failback", "-h"]) == ExitStatus.SUCCESS
    assert "<copy-safe|quarantine|none>" in capsys.readouterr().out
