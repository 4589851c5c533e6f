"""A command's data on stdout, whole when piped; messages on stderr; `-q` keeps the data."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
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


# Clusters and Connect down: nothing listens on these loopback ports.
DOWN = """
clusters:
  primary: {bootstrap.servers: "127.0.0.1:9"}
  secondary: {bootstrap.servers: "localhost:9,127.0.0.1:9"}
replication:
  kind: mirrormaker2
  source: primary
  target: secondary
  connect: {url: "http://127.0.0.1:9", source_connector: src, checkpoint_connector: cp}
retry: {initial_s: 0.2}
"""
DOWN_COMMANDS = [["status", "--deadline", "1"], ["check", "--deadline", "1"],
                 ["config", "check", "--deadline", "1"]]
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _on_terminal(args: list[str], columns: int, tmp_path: Path) -> str:
    """What `drctl ARGS` shows on a terminal `columns` wide (a pseudo-terminal: Rich sees a
    TTY), escape sequences removed."""
    main_fd, tty_fd = pty.openpty()
    fcntl.ioctl(tty_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": str(columns), "TERM": "xterm"}
    proc = subprocess.Popen(entry_command(*args), stdin=tty_fd, stdout=tty_fd, stderr=tty_fd,
                            env=env, cwd=tmp_path)
    os.close(tty_fd)
    shown = b""
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # the process closed its end
            break
        if not chunk:
            break
        shown += chunk
    proc.wait(timeout=120)
    os.close(main_fd)
    return _ESCAPES.sub("", shown.decode(errors="replace"))


def _tokens(text: str) -> set[str]:
    """Words, and the items of comma-separated lists (a terminal may break after a comma)."""
    return {part for word in text.split() for part in re.split(r"(?<=,)", word) if part}


@pytest.mark.parametrize("command", DOWN_COMMANDS, ids=" ".join)
def test_on_an_80_column_terminal_no_line_is_wider_and_no_token_is_split(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "drctl.yaml"
    cfg.write_text(DOWN)
    shown = _on_terminal(["--config", str(cfg), *command], 80, tmp_path)
    lines = shown.splitlines()
    assert lines, shown
    assert max(len(line) for line in lines) <= 80, "\n".join(
        line for line in lines if len(line) > 80)
    # Every token of the data, as a script reads it piped, is whole on the terminal.
    assert main(["--config", str(cfg), *command]) in (3, 4)
    piped = capsys.readouterr()
    words = set(shown.split())
    # Piped, headers are in capitals and an empty cell is "-".
    missing = {t for t in _tokens(piped.out) if t not in words
               and t.rstrip(",") not in words and not t.isupper() and t != "-"}
    assert not missing, (missing, shown)
    for address in ("127.0.0.1:9", "localhost:9"):
        # An address is never split across lines: it is inside one word.
        assert any(address in word for word in words), shown
    assert "ipv4#" not in shown  # librdkafka's own text is --debug's


@pytest.mark.parametrize("command", DOWN_COMMANDS, ids=" ".join)
def test_piped_each_row_is_one_line(command: list[str], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "drctl.yaml"
    cfg.write_text(DOWN)
    assert main(["--config", str(cfg), *command]) in (3, 4)
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines()
            if re.match(r"(primary|secondary|topics) {2,}", line)]
    # One line per cluster (status, config check) or per finding (check).
    assert len(rows) == 2, out
    assert all("secondary" in row for row in rows[1:]), out
    assert not set("│┃┏━╭─") & set(out)


def test_a_table_too_narrow_for_its_words_becomes_blocks_with_words_whole(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from io import StringIO

    from rich.console import Console

    term = Terminal()
    shown = StringIO()
    term.out = Console(file=shown, width=40, force_terminal=True, color_system=None)
    address = "broker-1.kafka.eu-west-1.internal.example.com:9092"
    term.table("Clusters", ["cluster", "bootstrap", "error"],
               [["primary", f"{address},{address}", "connection refused"]])
    lines = shown.getvalue().splitlines()
    assert lines[0] == "Clusters"
    assert lines[1:] == ["cluster:   primary",
                         f"bootstrap: {address},",
                         f"           {address}",
                         "error:     connection refused"]


def test_a_table_that_fits_shares_the_width_by_need_and_keeps_words_whole() -> None:
    from io import StringIO

    from rich.console import Console

    term = Terminal()
    shown = StringIO()
    term.out = Console(file=shown, width=40, force_terminal=True, color_system=None)
    term.table(None, ["object", "fix"],
               [["cluster primary", "check the host and port in bootstrap.servers"]])
    lines = [line.rstrip() for line in shown.getvalue().splitlines()]
    assert max(len(line) for line in lines) <= 40
    assert "bootstrap.servers" in " ".join(lines).split()
    assert lines[0].split() == ["object", "fix"]


def test_a_long_list_in_the_json_document_is_one_compact_item_per_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43: Python's indenting encoder is pure Python; 160,000 positions spent seconds
    in it. A long list is written one item per line, the same data."""
    import json

    from drctl.terminal import OutputFormat, Terminal

    term = Terminal(output=OutputFormat.json)
    data = {"summary": {"groups": 300}, "groups": [{"group": f"g{i}", "partitions": [
        {"partition": 0, "target_offset": i}]} for i in range(300)], "notes": ["a"]}
    term.emit_json(data)
    term.finish_json(0)
    out = capsys.readouterr().out
    assert json.loads(out) == {**data, "exit_status": 0}
    lines = out.splitlines()
    assert '    {"group":"g0","partitions":[{"partition":0,"target_offset":0}]},' in lines
    assert '  "summary": {' in lines and '    "groups": 300' in lines  # short: indented
