"""A step's process group (runbook/child.py `start_group`): an interrupt that arrives while
the step's process starts — on a loaded machine the shell had already started its own
children by then — still ends the whole group, and is still raised."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from drctl.interrupts import Terminated, sigterm_interrupts
from drctl.runbook.kinds import shell
from tests.unit.runbook.support import gone


def _interrupted_while_starting(monkeypatch: pytest.MonkeyPatch, pidfile: Path,
                                signum: int) -> list[subprocess.Popen[bytes]]:
    """Popen as the step calls it, with `signum` sent to this process before it returns:
    once the shell has started its background child (the race a loaded machine loses)."""
    real = subprocess.Popen
    started: list[subprocess.Popen[bytes]] = []

    def popen(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = real(*args, **kwargs)
        started.append(proc)
        end = time.monotonic() + 30
        while not pidfile.exists() or not pidfile.read_text().strip():
            assert time.monotonic() < end, "the shell never started its child"
            time.sleep(0.02)
        os.kill(os.getpid(), signum)
        return proc

    monkeypatch.setattr(subprocess, "Popen", popen)
    return started


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupt_while_the_shell_starts_ends_its_children_and_is_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int) -> None:
    pidfile = tmp_path / "sleep.pid"
    started = _interrupted_while_starting(monkeypatch, pidfile, signum)
    inputs = {"command": f"sleep 60 & echo $! > {pidfile}; wait", "env": {}}
    # Ctrl-C as drctl's process has it (an xdist worker ignores SIGINT).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as raised, sigterm_interrupts():
            shell._run_shell(inputs, timeout_s=None, grace_s=2)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert isinstance(raised.value, Terminated) == (signum == signal.SIGTERM)
    assert len(started) == 1
    assert started[0].returncode is not None, "the shell itself was not ended and reaped"
    assert gone(int(pidfile.read_text())), "the shell's child outlived the interrupt"


def test_the_handlers_before_the_start_are_back_after_it(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    outcome = shell._run_shell({"command": "echo ok", "env": {}}, timeout_s=30, grace_s=1)
    assert outcome["stdout"] == "ok"
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_an_ignored_interrupt_while_the_shell_starts_stays_ignored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT ignored (as in a process started with it ignored): the step runs on."""
    pidfile = tmp_path / "sleep.pid"
    _interrupted_while_starting(monkeypatch, pidfile, signal.SIGINT)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        outcome = shell._run_shell({"command": f"sleep 0.2 & echo $! > {pidfile}; wait; "
                                               "echo done", "env": {}},
                                   timeout_s=30, grace_s=1)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert outcome["stdout"] == "done"
