"""The root command (drctl/cli/app.py): --version and --help (-h, at 80 columns), global
options anywhere on the line, usage errors, the JSON error document, DRCTL_DEBUG, and the mode
choices the commands' help lists."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from typer.testing import CliRunner

from drctl import __version__
from drctl.cli.app import app, hoist_global_options, main
from drctl.errors import ExitStatus
from tests.unit.test_terminal import DOWN


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    lines = dict(line.split(" ", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["drctl"] == __version__
    assert lines["confluent-kafka"] == confluent_kafka.version()
    assert lines["librdkafka"] == confluent_kafka.libversion()[0]
    assert set(lines) == {"drctl", "python", "confluent-kafka", "librdkafka", "sasl_gssapi",
                          "pyspark", "java"}
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
    (["status", "-ojson", "-cf.yaml"], ["-ojson", "-cf.yaml", "status"]),
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


# The commands that change something: their help lists every exit status.
MUTATING = {"failover", "failback", "reprotect", "translate-offsets", "gap-analysis", "guard",
            "lab up", "lab down", "lab fail", "lab heal", "lab load", "runbook run"}
# A value shown in angle brackets after an option or argument (`--topic <list[str]>`).
_ANGLE_METAVAR = re.compile(r"^\s+(?:-\w, )?(?:--[\w-]+|[a-z|]+)(?: / --[\w-]+)? <[^>]*>")


def _help_at_80(path: list[str], monkeypatch: pytest.MonkeyPatch,
                capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*path, "-h"]) == ExitStatus.SUCCESS
    text = capsys.readouterr().out
    assert "Usage: drctl" in text
    return text


def _open_bracket_lines(text: str) -> list[str]:
    """Lines that end inside a `[...]` still open (a default or choice list cut short)."""
    out = []
    for line in text.splitlines():
        if line.count("[") > line.count("]"):
            out.append(line)
    return out


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "drctl")
def test_help_reads_at_80_columns(path: list[str], monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    text = _help_at_80(path, monkeypatch, capsys)
    lines = text.splitlines()
    assert [line for line in lines if len(line) > 80] == []
    assert "<bool>" not in text and not set("│╭╰─") & set(text)
    # Values have names (TOPIC, N, DIR) or their choices, never Typer's type names.
    assert [line for line in lines if _ANGLE_METAVAR.match(line)] == []
    for typer_name in ("<str>", "<int>", "<path>", "<float>", "<list[", "range>", "x>="):
        assert typer_name not in text, typer_name
    # A default reads `[default: 30s]`, never `[default: (30s)]`.
    assert re.findall(r"\[default: \(", text) == []
    # Never cut at a hyphen inside a default or a choice (`consumer-` / `timestamps]`).
    assert [line for line in _open_bracket_lines(text) if line.rstrip().endswith("-")] == []
    assert [line for line in lines if re.search(r"\w-$", line)] == []
    assert "\n  Examples:\n" in text or text.startswith("Examples:")
    if " ".join(path) in MUTATING:
        assert "Exit status:" in text


@pytest.mark.parametrize("path", [p for p in _command_paths() if p],
                         ids=lambda p: " ".join(p))
def test_every_command_help_shows_the_global_options(
        path: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    text = _help_at_80(path, monkeypatch, capsys)
    globals_part = text.split("Global options (also before the command):\n")[1]
    for option in ("-c, --config PATH", "--debug", "-q, --quiet"):
        assert f"\n  {option} " in f"\n{globals_part}", option
    # --output once: the command's own where it has one, else the global one.
    assert text.count("-o, --output [text|json]") == 1


def test_choices_and_defaults_are_never_split_across_lines(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help_at_80(["failback"], monkeypatch, capsys)
    assert "--reconcile [copy-safe|quarantine|none]" in text
    assert "[default: 30s]" in text and "[default: copy-safe]" in text
    text = _help_at_80(["dump-consumer-timestamps"], monkeypatch, capsys)
    assert "[default: consumer-timestamps]" in text
    assert "--kind [consumer-timestamps|checkpoints|offset-syncs|heartbeats]" in text
    text = _help_at_80(["lab", "fail"], monkeypatch, capsys)
    assert "primary|secondary|replication  primary or secondary: that cluster's" in text


def test_every_command_is_listed_once_under_its_section(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help_at_80([], monkeypatch, capsys)
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
            sections[current] = []
        elif current in {"Incident", "Inspect", "Runbooks", "Lab"} and line.strip():
            sections[current].append(line.split()[0])
    assert sections["Incident"] == ["failover", "failback", "reprotect", "translate-offsets",
                                    "audit", "guard"]
    assert sections["Inspect"] == ["status", "check", "gap-analysis",
                                   "dump-consumer-timestamps", "config"]
    assert sections["Runbooks"] == ["runbook"] and sections["Lab"] == ["lab"]
    assert "Commands" not in sections and "Other commands" not in sections
    # Every command drctl has is in one section; each line fits without "...".
    listed = [c for name in ("Incident", "Inspect", "Runbooks", "Lab") for c in sections[name]]
    import typer

    assert sorted(listed) == sorted(typer.main.get_command(app).commands)
    assert "..." not in text.split("Incident:")[1]


def test_a_hyphenated_word_is_never_broken() -> None:
    from drctl.cli.help import wrap_text

    text = "aaaa " * 10 + "consumer-timestamps and post-failover"
    for width in range(20, 60):
        for line in wrap_text(text, width).splitlines():
            assert not line.endswith("-")
        assert "consumer-timestamps" in wrap_text(text, width)



@pytest.mark.parametrize(("code", "status", "said"), [
    # What a raw metadata request answers while a broker restarts: unknown, exit 4.
    (confluent_kafka.KafkaError._TRANSPORT, ExitStatus.UNREACHABLE, "did not answer"),
    (confluent_kafka.KafkaError.NOT_COORDINATOR, ExitStatus.UNREACHABLE, "did not answer"),
    # Permanent: not a cluster that waiting cures; a bug to report.
    (confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED, ExitStatus.FAILURE, "unexpected"),
])
def test_a_kafka_error_nothing_retried_is_classified_at_the_edge(
        code: int, status: ExitStatus, said: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from drctl.cli import check_cmd

    def fails(*_: Any) -> None:
        raise confluent_kafka.KafkaException(confluent_kafka.KafkaError(
            code, "Failed to get metadata", retriable=False))

    monkeypatch.setattr(check_cmd, "run_check", fails)
    cfg = tmp_path / "drctl.yaml"
    cfg.write_text(DOWN)  # nothing answers: the command's core is replaced anyway
    assert main(["--config", str(cfg), "-o", "json", "check", "--deadline", "1"]) == status
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["exit_status"] == status and said in doc["error"]["message"]
    assert doc["error"]["kind"] == ("Unreachable" if status == ExitStatus.UNREACHABLE
                                    else "KafkaException")
    assert "Traceback" not in captured.err
