"""`--output json`: one document per command, whatever happens — success, a usage error, an
unreachable cluster — each validated against the command's JSON Schema (docs/schemas/,
docs/json.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from drctl.cli.app import main
from drctl.errors import ExitStatus
from tests.json_schemas import SCHEMAS, command_of, schema_name, validate_output
from tests.unit.runbook.support import write


def _leaf_commands() -> list[list[str]]:
    import typer

    from drctl.cli.app import app

    paths: list[list[str]] = []

    def walk(cmd: Any, path: list[str]) -> None:
        subcommands = getattr(cmd, "commands", None)
        if subcommands is None:
            paths.append(path)
            return
        for name, sub in subcommands.items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return paths


LEAVES = _leaf_commands()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    """`drctl ARGV…` in-process: its exit status, the one JSON document on stdout (validated
    against the command's schema) and stderr."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    document = json.loads(out)  # one document: anything before or after it fails here
    assert document["exit_status"] == status, document
    validate_output(command_of(argv), document)
    return status, document, err


def unreachable_config(tmp_path: Path) -> Path:
    """Both clusters at 127.0.0.1:1, where nothing listens."""
    cfg = tmp_path / "drctl.yaml"
    cfg.write_text("clusters:\n  a: {bootstrap.servers: '127.0.0.1:1'}\n"
                   "  b: {bootstrap.servers: '127.0.0.1:1'}\n"
                   "replication: {kind: mirrormaker2, source: a, target: b}\n"
                   f"state: {{dir: '{tmp_path / 'state'}'}}\n"
                   "retry: {initial_s: 0.2, max_s: 0.5}\n")
    return cfg


def test_every_command_has_a_schema_and_every_schema_a_command() -> None:
    expected = {schema_name(path) for path in LEAVES} | {"drctl.json", "envelope.json"}
    assert {p.name for p in SCHEMAS.glob("*.json")} == expected


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_a_usage_error_is_the_document_with_its_error(
        path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    status, doc, err = run(capsys, "-o", "json", *path, "--no-such-option")
    assert status == ExitStatus.USAGE
    assert doc["error"]["kind"] == "UsageError"
    assert "--no-such-option" in doc["error"]["message"]
    assert f"drctl {' '.join(path)} -h" in doc["error"]["hint"]
    assert "No such option: --no-such-option" in err  # said on stderr as before


@pytest.mark.parametrize("argv", [
    ["failover", "--dryrun", "-o", "json"],           # -o after the subcommand
    ["-o", "json", "failover", "--deadline", "3x"],  # a value that does not parse
    ["--output=json", "runbook", "plan"],            # a missing argument
    ["-o", "json", "no-such-command"],
    ["status", "--deadline", "soon", "-ojson"],
])
def test_usage_errors_before_or_after_the_subcommand(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    status, doc, _ = run(capsys, *argv)
    assert status == ExitStatus.USAGE and doc["error"]["kind"] == "UsageError"
    assert set(doc) == {"exit_status", "error"}


def test_a_bad_value_names_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    _, doc, _ = run(capsys, "-o", "json", "failover", "--deadline", "3x")
    assert "--deadline" in doc["error"]["message"] and "'3x'" in doc["error"]["message"]


def test_help_stays_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-o", "json", "status", "-h"]) == ExitStatus.SUCCESS
    out = capsys.readouterr().out
    assert out.startswith("Usage: drctl status") and "exit_status" not in out


# Every command that reaches a cluster, against clusters that do not answer: exit 4 and the
# document, with the data the command could still give (status, check: rows that say so).
UNREACHABLE = [
    ["status", "--deadline", "1s"],
    ["check", "--deadline", "1s"],
    ["config", "check", "--deadline", "1s"],
    ["translate-offsets", "--deadline", "1s"],
    ["failover", "--dry-run", "--deadline", "1s"],
    ["failback", "--dry-run", "--deadline", "1s"],
    ["reprotect", "--dry-run", "--deadline", "1s"],
    ["gap-analysis", "--deadline", "1s"],
    ["guard", "--once", "--deadline", "1s"],
    ["audit", "--deadline", "1s"],
    ["dump-consumer-timestamps", "--deadline", "1s"],
    ["runbook", "plan", "failover", "--var", "deadline=1s"],
]


@pytest.mark.parametrize("argv", UNREACHABLE, ids=lambda a: " ".join(a[:2]))
def test_an_unreachable_cluster_is_exit_4_and_the_document(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, doc, _ = run(capsys, "--config", str(unreachable_config(tmp_path)), "-o", "json",
                         *argv)
    assert status == ExitStatus.UNREACHABLE, doc
    if "error" in doc:
        assert doc["error"]["kind"] == "Unreachable" and "127.0.0.1:1" in doc["error"]["message"]
        # The wait it ended, as drctl measured it, under the --deadline given (1 s).
        error = doc["error"]
        assert error["deadline_s"] == 1.0 and 0.5 <= error["waited_s"] <= 6, error


def test_data_emitted_before_an_error_stays_in_the_document(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """dump streams its rows: a cluster that does not answer ends the list, and the document
    closes with the error."""
    _, doc, _ = run(capsys, "--config", str(unreachable_config(tmp_path)), "-o", "json",
                    "dump-consumer-timestamps", "--deadline", "1s")
    assert doc["rows"] == [] and doc["error"]["kind"] == "Unreachable"


def test_commands_that_need_no_cluster(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    cfg = unreachable_config(tmp_path)
    _, doc, _ = run(capsys, "-o", "json", "--version")
    assert doc["versions"]["drctl"] and doc["exit_status"] == 0
    _, doc, _ = run(capsys, "-o", "json", "--config", str(cfg), "config", "show")
    assert set(doc["clusters"]) == {"a", "b"}
    _, doc, _ = run(capsys, "-o", "json", "runbook", "list")
    assert "failover" in [r["name"] for r in doc["runbooks"]]
    _, doc, _ = run(capsys, "-o", "json", "runbook", "actions")
    assert "translate-offsets" in [a["name"] for a in doc["actions"]]
    _, doc, _ = run(capsys, "-o", "json", "runbook", "validate", "failover")
    assert doc["valid"] is True
    _, doc, _ = run(capsys, "-o", "json", "runbook", "show", "failover")
    assert doc["yaml"].startswith("#")
    rb = write(tmp_path / "rb.yaml", """
        steps:
          - name: hello
            shell: echo hello
          - name: holds
            check: {value: 1, equals: 1}
    """)
    _, doc, _ = run(capsys, "-o", "json", "runbook", "plan", str(rb))
    assert doc["status"] == "planned" and doc["exit_status"] == 0
    _, doc, _ = run(capsys, "-o", "json", "runbook", "run", str(rb), "--journal",
                    str(tmp_path / "j.jsonl"))
    assert doc["status"] == "succeeded"
    _, doc, _ = run(capsys, "-o", "json", "lab", "down", "--dir", str(tmp_path / "no-lab"))
    assert doc == {"stopped": [], "purged": False, "exit_status": 0}


@pytest.mark.parametrize("argv", [["lab", "status"], ["lab", "fail", "primary"],
                                  ["lab", "heal", "primary"], ["lab", "load"]])
def test_lab_commands_without_a_lab_fail_with_the_document(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, doc, _ = run(capsys, "-o", "json", *argv, "--dir", str(tmp_path / "no-lab"))
    assert status == ExitStatus.FAILURE and doc["error"]["kind"] == "LabError"


def test_a_reader_that_stops_reading_gets_no_traceback() -> None:
    """`drctl -o json … | head -c1` where the pipe closes before drctl writes its document:
    exit 1 and no traceback (Python's BrokenPipeError at the last flush used to print one)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "drctl", "-o", "json", "runbook", "validate",
         str(root / "runbooks" / "drill.yaml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone before drctl writes a byte
    err = proc.stderr.read().decode()
    assert proc.wait(60) == ExitStatus.FAILURE
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_sigterm_ends_a_command_as_ctrl_c_does(tmp_path: Path) -> None:
    """CI cancelling a job, systemd stopping a unit: SIGTERM ends drctl as Ctrl-C does —
    exit 130 and the JSON document saying so, the command's own cleanup run (a gap job
    interrupted on its server, drctl's temporary directory removed) — where Python's
    default ended the process on the spot."""
    import os
    import signal
    import subprocess
    import sys

    from tests.unit.cli.support import unreachable_config

    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "drctl", "-o", "json", "--config",
         str(unreachable_config(tmp_path)), "status", "--deadline", "5m"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(root)})
    try:
        # Until drctl has set its SIGTERM handler (the signal's bit in the caught mask).
        status_file = Path(f"/proc/{proc.pid}/status")
        for _ in range(600):
            caught = next(line for line in status_file.read_text().splitlines()
                          if line.startswith("SigCgt:"))
            if int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
                break
            time.sleep(0.1)
        else:
            raise AssertionError("drctl never set a SIGTERM handler")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == ExitStatus.INTERRUPTED, err
    doc = json.loads(out)
    assert doc["error"]["kind"] == "Interrupted" and doc["exit_status"] == 130, doc
    assert b"Traceback" not in err, err


def test_a_second_interrupt_during_the_cleanup_is_exit_130_without_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C (or SIGTERM) again while the first one's cleanup closes the command's clients:
    it escaped `main` and ended drctl with Python's traceback."""
    from drctl.cli import app as cli_app

    def interrupted_cleanup() -> int:
        raise KeyboardInterrupt  # as from main's `finally`, closing the clients

    monkeypatch.setattr(cli_app, "main", interrupted_cleanup)
    with pytest.raises(SystemExit) as ended:
        cli_app.run()
    assert ended.value.code == ExitStatus.INTERRUPTED
    err = capsys.readouterr().err
    assert "interrupted again" in err and "Traceback" not in err, err
