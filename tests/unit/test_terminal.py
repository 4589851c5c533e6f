"""A command's data on stdout, whole when piped; messages on stderr; `-q` keeps the data."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from drctl.cli.app import main
from drctl.runbook.actions import builtin_registry
from drctl.terminal import Terminal
from tests.unit.runbook.support import REPO, entry_command

# Longer than any terminal: Rich used to fold it at 80 columns, mid-word, when piped.
LONG_SERVERS = ",".join(f"broker-{n}.kafka.eu-west-1.internal.example.com:9092"
                        for n in range(1, 9))

CONFIG = f"""
clusters:
  primary:
    bootstrap.servers: {LONG_SERVERS}
    sasl.password: ${{env:DRCTL_TEST_OUTPUT_PASSWORD}}
  secondary:
    bootstrap.servers: 127.0.0.1:29092
state: {{dir: state}}
"""


@pytest.fixture
def config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DRCTL_TEST_OUTPUT_PASSWORD", "pw-never-printed")
    path = tmp_path / "drctl.yaml"
    path.write_text(CONFIG)
    return path


@pytest.mark.parametrize("quiet", [[], ["-q"]])
def test_config_show_is_whole_yaml_on_stdout(config_file: Path, quiet: list[str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(config_file), *quiet, "config", "show"]) == 0
    captured = capsys.readouterr()
    shown = yaml.safe_load(captured.out)
    assert shown["clusters"]["primary"]["bootstrap.servers"] == LONG_SERVERS
    # Shown as the reference it was written as; never the password it names.
    assert shown["clusters"]["primary"]["sasl.password"] == "${env:DRCTL_TEST_OUTPUT_PASSWORD}"
    assert "pw-never-printed" not in captured.out + captured.err
    assert "bootstrap.servers" not in captured.err


def test_config_show_redirected_in_a_real_process_parses(config_file: Path,
                                                         tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80",
           "DRCTL_TEST_OUTPUT_PASSWORD": "pw-never-printed"}
    with open(tmp_path / "shown.yaml", "w") as out:
        done = subprocess.run(entry_command("--config", str(config_file), "config", "show"),
                              stdout=out, stderr=subprocess.PIPE, text=True, env=env,
                              timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    shown = yaml.safe_load((tmp_path / "shown.yaml").read_text())
    assert shown["clusters"]["primary"]["bootstrap.servers"] == LONG_SERVERS


@pytest.mark.parametrize("quiet", [[], ["-q"]])
def test_a_piped_table_is_on_stdout_with_whole_words(quiet: list[str],
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert main([*quiet, "runbook", "actions"]) == 0
    captured = capsys.readouterr()
    actions = list(builtin_registry())
    assert len(actions) > 3
    for action in actions:
        # Each help text (longer than 80 columns for some) on one line, not folded.
        assert action.help in captured.out, action.name
    assert captured.err == ""


def test_json_output_stays_one_document_when_a_command_also_draws_a_table(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runbook = tmp_path / "tiny.yaml"
    runbook.write_text("steps:\n  - name: hello\n    shell: echo hello\n")
    assert main(["-o", "json", "runbook", "run", str(runbook), "--journal",
                 str(tmp_path / "j.jsonl")]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["status"] == "succeeded"
    assert "Runbook tiny" in captured.err  # the summary table, for people


def test_quiet_hides_messages_but_keeps_the_table(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    runbook = tmp_path / "tiny.yaml"
    runbook.write_text("steps:\n  - name: hello_step\n    shell: echo hello\n")
    assert main(["-q", "runbook", "validate", str(runbook)]) == 0
    captured = capsys.readouterr()
    assert "hello_step" in captured.out
    assert captured.err == ""  # the "is valid" line is a message


def test_a_piped_table_is_plain_aligned_columns(capsys: pytest.CaptureFixture[str]) -> None:
    term = Terminal()
    term.table("Groups", ["group", "lag", "error"],
               [["billing", 3, None], ["audit-long-name", 12, "connection refused"]])
    out = capsys.readouterr().out
    assert out.splitlines() == ["Groups",
                                "GROUP            LAG  ERROR",
                                "billing          3    -",
                                "audit-long-name  12   connection refused"]
    assert not set("│┃┏━╭─") & set(out)


def test_runbook_list_piped_is_short_plain_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runbook", "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split() == ["RUNBOOK", "STEPS", "DESCRIPTION"]
    assert max(len(line) for line in out.splitlines()) <= 100
    assert not set("│┃┏━╭─") & set(out)
