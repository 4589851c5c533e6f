"""The run journal (drctl/runbook/journal.py): its reader tolerates a torn last record and
it is locked while a run appends. Crash and resume: a run killed with SIGKILL continues
from its journal without running a completed step twice, and refuses when the runbook or
its variables changed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from drctl.errors import ExitStatus
from drctl.runbook.journal import Journal, JournalBusy, ResumeRefused, read_journal
from drctl.secrets import Redactor
from tests.unit.runbook.support import drctl, entry_command, gone, write


def test_journal_reader_tolerates_a_torn_last_record(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    lines = [
        {"type": "run", "version": 1, "run_id": "r1", "digest": "d"},
        {"type": "step-end", "step": "a", "phase": "main", "status": "ok", "completed": True},
        {"type": "step-end", "step": "b", "phase": "main", "status": "failed",
         "completed": False},
    ]
    journal.write_text("\n".join(json.dumps(r) for r in lines) + '\n{"type": "step-st')
    state = read_journal(journal)
    assert list(state.completed) == ["a"] and not state.rolled_back and state.finished is None
    journal.write_text('{"type": "step-end"}\n')
    with pytest.raises(ResumeRefused, match="not a drctl runbook journal"):
        read_journal(journal)
    journal.write_text(json.dumps(lines[0]) + "\nnot json\n" + json.dumps(lines[1]) + "\n")
    with pytest.raises(ResumeRefused, match=":2: not a journal record"):
        read_journal(journal)


def test_journal_drops_a_torn_record_before_appending_and_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"type": "run", "version": 1}\n{"type": "step-st')
    journal = Journal(path, Redactor(["hunter22"]))
    try:
        journal.write({"type": "resume", "note": "password hunter22"})
        with pytest.raises(JournalBusy):
            Journal(path, Redactor())
    finally:
        journal.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["type"] for r in lines] == ["run", "resume"]
    assert lines[1]["note"] == "password ****"
    Journal(path, Redactor()).close()  # the lock ends with the run


def records(journal: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def wait_for(journal: Path, predicate: Any, proc: subprocess.Popen[bytes],
             deadline_s: float = 30) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if journal.exists() and any(predicate(r) for r in records(journal)):
            return
        if proc.poll() is not None:
            raise AssertionError(f"drctl exited early: {proc.stderr.read().decode()}"
                                 if proc.stderr else "drctl exited early")
        time.sleep(0.05)
    raise AssertionError("the run never got there")


def counting_runbook(tmp_path: Path) -> Path:
    return write(tmp_path / "drill.yaml", f"""
        inputs: {{site: dr}}
        steps:
          - name: one
            shell: echo run >> {tmp_path}/one.count
          - name: two
            shell: |
              echo run >> {tmp_path}/two.count
              wc -l < {tmp_path}/two.count
            outputs: {{runs: "{{{{ result.stdout | trim | int }}}}"}}
          - name: hold
            pause: 60s
          - name: three
            shell: |
              echo run >> {tmp_path}/three.count
              echo "{{{{ vars.site }}}} {{{{ steps.two.outputs.runs }}}}" > {tmp_path}/three.out
    """)


def count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def start_run(tmp_path: Path, runbook: Path, journal: Path, *extra: str
              ) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "DRCTL_RUNBOOK_TIME_SCALE"}
    return subprocess.Popen(entry_command("runbook", "run", str(runbook), "--journal",
                                          str(journal), "--var", "site=dr", *extra),
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_sigkill_then_resume_runs_each_step_once(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    runbook = counting_runbook(tmp_path)
    journal = tmp_path / "drill.jsonl"
    proc = start_run(tmp_path, runbook, journal)
    try:
        wait_for(journal, lambda r: r["type"] == "step-start" and r["step"] == "hold", proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    kept = records(journal)
    assert kept[-1]["type"] == "step-start" and kept[-1]["step"] == "hold"
    assert [r["step"] for r in kept if r["type"] == "step-end"] == ["one", "two"]
    assert (count(tmp_path / "one.count"), count(tmp_path / "two.count")) == (1, 1)

    # The pause that was cut short runs again (fast: waits are scaled), the rest once.
    monkeypatch.setenv("DRCTL_RUNBOOK_TIME_SCALE", "0.001")
    assert drctl("runbook", "run", str(runbook), "--resume", str(journal),
                 "--var", "site=dr") == ExitStatus.SUCCESS
    assert (count(tmp_path / "one.count"), count(tmp_path / "two.count"),
            count(tmp_path / "three.count")) == (1, 1, 1)
    # Step three read step two's output back from the journal.
    assert (tmp_path / "three.out").read_text().strip() == "dr 1"
    after = records(journal)
    assert [r["type"] for r in after[len(kept):]] == [
        "resume", "step-start", "step-end", "step-start", "step-end", "run-end"]
    assert after[len(kept)]["from_step"] == "hold"
    assert after[-1]["status"] == "succeeded"
    assert len({r.get("run_id") for r in after if "run_id" in r}) == 1

    # A finished run has nothing left to resume.
    assert drctl("runbook", "run", str(runbook), "--resume", str(journal),
                 "--var", "site=dr") == ExitStatus.USAGE
    assert count(tmp_path / "one.count") == 1


def test_resume_refuses_a_changed_runbook_or_changed_variables(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runbook = write(tmp_path / "stops.yaml", f"""
        inputs: {{site: dr}}
        steps:
          - name: one
            shell: echo run >> {tmp_path}/one.count
          - name: stop_here
            shell: test -f {tmp_path}/go
          - name: three
            shell: echo "{{{{ vars.site }}}}" >> {tmp_path}/three.count
    """)
    journal = tmp_path / "j.jsonl"
    assert drctl("runbook", "run", str(runbook), "--journal", str(journal)) == \
        ExitStatus.FAILURE
    err = capsys.readouterr().err.replace("\n", " ")
    assert "--resume" in err and str(journal) in err
    (tmp_path / "go").touch()

    assert drctl("runbook", "run", str(runbook), "--resume", str(journal), "--var",
                 "site=elsewhere") == ExitStatus.USAGE
    assert "variables changed: site" in capsys.readouterr().err

    original = runbook.read_text()
    runbook.write_text(original.replace("echo run", "echo RUN"))
    assert drctl("runbook", "run", str(runbook), "--resume", str(journal)) == \
        ExitStatus.USAGE
    err = capsys.readouterr().err.replace("\n", " ")
    assert "changed since the journal" in err
    assert count(tmp_path / "three.count") == 0

    # Restored: the failed step runs again, the completed one does not.
    runbook.write_text(original)
    assert drctl("runbook", "run", str(runbook), "--resume", str(journal)) == 0
    assert (count(tmp_path / "one.count"), count(tmp_path / "three.count")) == (1, 1)


def test_ctrl_c_kills_the_shell_step_and_journals_the_interruption(tmp_path: Path) -> None:
    pidfile = tmp_path / "sleep.pid"
    runbook = write(tmp_path / "long.yaml", f"""
        steps:
          - name: long
            shell: |
              sleep 60 &
              echo $! > {pidfile}
              wait
          - name: after
            shell: echo after
    """)
    journal = tmp_path / "j.jsonl"
    proc = subprocess.Popen(entry_command("runbook", "run", str(runbook), "--journal",
                                          str(journal), "--junit", str(tmp_path / "j.xml")),
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(journal, lambda r: r["type"] == "step-start" and r["step"] == "long", proc)
        end = time.monotonic() + 10
        while not pidfile.exists() or not pidfile.read_text().strip():
            assert time.monotonic() < end
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == ExitStatus.INTERRUPTED
    kept = records(journal)
    assert kept[-2]["type"] == "step-end" and kept[-2]["status"] == "interrupted"
    assert kept[-1] == {**kept[-1], "type": "run-end", "status": "interrupted",
                        "exit_status": 130}
    assert (tmp_path / "j.xml").exists()
    assert gone(int(pidfile.read_text()))
