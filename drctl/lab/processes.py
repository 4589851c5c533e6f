"""Background JVMs the lab starts: pid files that survive drctl, stop and kill that never hang."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from drctl.errors import LabError
from drctl.retry import WaitTimedOut, wait_for


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def wait_until(check: Callable[[], bool], *, deadline_s: float, what: str, log_file: Path | None,
               alive: Callable[[], bool] | None = None, interval_s: float = 0.25) -> None:
    """Poll `check` until it holds; fail with the log to read when time runs out or the
    process died."""
    def ready() -> bool | None:
        try:
            if check():
                return True
        except LabError:
            raise
        except Exception:  # noqa: BLE001 - any other failure of a probe means "not yet"
            pass
        if alive is not None and not _alive_on_a_second_look(alive):
            raise LabError(f"{what}: the process exited.", _read_hint(log_file))
        return None

    try:
        wait_for(ready, deadline_s=deadline_s, interval_s=interval_s)
    except WaitTimedOut:
        raise LabError(f"{what}: not ready after {deadline_s:.0f} s.",
                       _read_hint(log_file)) from None


def _alive_on_a_second_look(alive: Callable[[], bool]) -> bool:
    """True when `alive` holds now or half a second later: one look can fall between the
    steps of a process's exec()."""
    if alive():
        return True
    time.sleep(0.5)
    return alive()


def _read_hint(log_file: Path | None) -> str:
    return f"Read {log_file}." if log_file else "See the lab's logs."


@dataclass
class ManagedProcess:
    """One background process of the lab, known by its pid file."""

    name: str
    workdir: Path
    signature: str  # a string in the command line that proves a pid is still ours

    @property
    def pid_file(self) -> Path:
        return self.workdir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.workdir / f"{self.name}.log"

    @property
    def console_file(self) -> Path:
        return self.workdir / f"{self.name}.out"

    def pid(self) -> int | None:
        try:
            data = json.loads(self.pid_file.read_text())
            return int(data["pid"])
        except (OSError, ValueError, KeyError):
            return None

    def is_running(self) -> bool:
        pid = self.pid()
        if pid is None:
            return False
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            # While a process exec()s (spark-class's bash becoming java) its command line
            # reads empty for a moment: read again rather than call it gone.
            for _ in range(20):
                if cmdline:
                    break
                time.sleep(0.05)
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        # A zombie (exited, not yet reaped) is not running.
        state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "?"
        return self.signature in cmdline and state != "Z"

    def rss_bytes(self) -> int:
        pid = self.pid()
        if pid is None or not self.is_running():
            return 0
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            return 0
        return 0

    def start(self, cmd: Sequence[str], env: dict[str, str] | None = None) -> int:
        if self.is_running():
            return self.pid() or 0
        self.workdir.mkdir(parents=True, exist_ok=True)
        with self.console_file.open("ab") as out:
            proc = subprocess.Popen(
                list(cmd), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.workdir, env={**os.environ, **(env or {})},
                start_new_session=True,  # our own process group: Ctrl-C on drctl spares it
            )
        self.pid_file.write_text(json.dumps({"pid": proc.pid, "cmd": list(cmd),
                                             "started": time.time()}))
        # Until the child has exec'd, /proc shows our own command line, not the signature.
        end = time.monotonic() + 10
        while not self.is_running() and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        return proc.pid

    def kill(self) -> None:
        """Hard kill, like a datacenter losing power."""
        self._signal(signal.SIGKILL)
        self._wait_gone(10)

    def command(self) -> list[str]:
        """The command line it was started with (its pid file's), empty when unknown."""
        try:
            return [str(a) for a in json.loads(self.pid_file.read_text()).get("cmd", [])]
        except (OSError, ValueError, AttributeError):
            return []

    def stop(self, grace_s: float = 20) -> bool:
        """SIGTERM, then SIGKILL after `grace_s`; returns once the process is gone: True when
        it ended on SIGTERM (it shut down as it does), False when it was killed or was not
        running."""
        if not self.is_running():
            self.pid_file.unlink(missing_ok=True)
            return False
        self._signal(signal.SIGTERM)
        ended = self._wait_gone(grace_s)
        if not ended:
            self._signal(signal.SIGKILL)
            self._wait_gone(10)
        self.pid_file.unlink(missing_ok=True)
        return ended

    def _signal(self, sig: int) -> None:
        pid = self.pid()
        if pid is None or not self.is_running():
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        # Reap it if we are its parent (tests start and stop in one process).
        self._reap(pid)

    def _reap(self, pid: int) -> None:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass

    def _wait_gone(self, deadline_s: float) -> bool:
        end = time.monotonic() + deadline_s
        pid = self.pid()
        while time.monotonic() < end:
            if pid is not None:
                self._reap(pid)
            if not self.is_running():
                return True
            time.sleep(0.1)
        return not self.is_running()
