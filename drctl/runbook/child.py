"""An action step run in a child process of its own (`process: child`): a drill can kill,
stop or terminate the drctl operation the way a lost machine or an operator would, and the
runbook's resume runs the step again, as the operator would run the command again.

The parent sends the action's name, its rendered parameters, the registry to build and the
configuration's path on the child's stdin, then closes it; the child calls the action and
answers one JSON document on stdout — the result, or the error (message, hint, whether a
cluster did not answer, whether another attempt may help). Its progress lines go to stderr,
which the parent reads line by line as the step's progress. The child runs in a session of
its own: a timeout, Ctrl-C or a fault ends its whole process group (its own children too).

This module is the parent's side; the child's is runbook/child_main.py (it imports the
action kinds, which import this).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import drctl
from drctl.progress import Notify
from drctl.runbook.kinds.interface import AttemptFailed, NotRetried

# Lines of the child's stderr kept to explain a death without an answer.
_KEPT_LINES = 20


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def call_in_child(action: str, params: Mapping[str, Any], *, registry_factory: str | None,
                  config_path: Path | None, timeout_s: float | None, grace_s: float,
                  notify: Notify, started: Callable[[int], None] = lambda _pid: None) -> Any:
    """The action's JSON-like result, computed in a child process; its failures as
    AttemptFailed (another attempt may help: the process was killed, a cluster did not
    answer) or NotRetried. `started` gets the child's pid (its process group's id too)."""
    if registry_factory is None:
        raise NotRetried(f"action {action} cannot run in a child process: its registry has "
                         "no factory a child could build it with",
                         "Run the step in-process (drop `process: child`).")
    request = {"action": action, "params": dict(params), "registry": registry_factory,
               "config": str(config_path) if config_path is not None else None}
    # The child imports the same drctl (and a test's registry module beside it).
    root = str(Path(drctl.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    lines: list[str] = []
    out: list[bytes] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode(errors="replace").rstrip("\n")
            lines.append(line)
            del lines[:-_KEPT_LINES]
            if line.strip():
                notify(line.strip())

    def read_stdout() -> None:
        assert proc.stdout is not None
        out.append(proc.stdout.read())

    # Made before the start: from it on, an interrupt finds the `try` that ends the group.
    readers = [threading.Thread(target=read_stderr, daemon=True, name="child-stderr"),
               threading.Thread(target=read_stdout, daemon=True, name="child-stdout")]
    try:
        proc = start_group([sys.executable, "-m", "drctl.runbook.child_main"], grace_s,
                           env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    except OSError as exc:
        raise AttemptFailed(f"cannot start the step's process: {exc}") from exc
    try:
        started(proc.pid)
        for reader in readers:
            reader.start()
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(request, default=str).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass  # it died at once; its exit status says how
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            end_group(proc, grace_s)
            raise AttemptFailed(f"timed out after {timeout_s:g} s; its process group was "
                                "ended") from None
    except BaseException:
        end_group(proc, grace_s)
        raise
    finally:
        for reader in readers:
            if reader.ident is not None:  # started (an interrupt can come before)
                reader.join(10)
    return _answer(action, proc.returncode, b"".join(out), lines)


def _answer(action: str, status: int, stdout: bytes, lines: list[str]) -> Any:
    if status < 0:
        raise AttemptFailed(f"the step's process (action {action}) ended on "
                            f"{signal_name(-status)}",
                            hint="Run the runbook again with --resume: the step runs again, "
                                 "as an operator would run the command again.")
    try:
        answer = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not ({"result", "error"} & set(answer)):
        tail = " / ".join(line for line in lines[-3:] if line.strip())
        raise AttemptFailed(f"the step's process (action {action}) exited with status "
                            f"{status} without an answer" + (f": {tail}" if tail else ""))
    if "error" in answer:
        error = answer["error"]
        if error.get("retried", True):
            raise AttemptFailed(str(error.get("message")), hint=error.get("hint"),
                                unreachable=bool(error.get("unreachable")))
        raise NotRetried(str(error.get("message")), error.get("hint"))
    return answer["result"]


def start_group(args: list[str], grace_s: float, **popen: Any) -> subprocess.Popen[bytes]:
    """`args` started in a session of its own (its process group: `end_group`). Ctrl-C or
    SIGTERM arriving while it starts is held until the process is ours: raised inside
    Popen, it lost the process (on a loaded machine the shell had started its own children
    and they outlived the runbook). Held, the group is ended and the signal raised again,
    as its handler before would have taken it."""
    held: list[int] = []
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for number in (signal.SIGINT, signal.SIGTERM):
            # Left alone: one ignored (an xdist worker's SIGINT) stays ignored, and None is
            # not Python's to put back.
            if signal.getsignal(number) not in (None, signal.SIG_IGN):
                previous[number] = signal.signal(number,
                                                 lambda signum, _frame: held.append(signum))
    try:
        proc = subprocess.Popen(args, start_new_session=True, **popen)
    except BaseException:
        _restore(previous)
        _raise_held(held)
        raise
    _restore(previous)
    if held:
        end_group(proc, grace_s)
        _raise_held(held)
    return proc


def _restore(previous: Mapping[int, Any]) -> None:
    for number, handler in previous.items():
        signal.signal(number, handler)


def _raise_held(held: list[int]) -> None:
    for number in dict.fromkeys(held):
        signal.raise_signal(number)  # the handler restored above runs (raises, or ends us)


def end_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to the process group, then SIGKILL to whatever of it is left after `grace_s`
    (a grandchild can outlive the leader); reaped within a bounded wait. Shared by the
    runbook's child steps and its shell steps."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass
