"""One Spark driver kept up between the gap jobs of one drctl process.

A gap job's own process pays for a JVM, a SparkContext and a cold JIT every time: seconds
that dwarf a small comparison. A process that runs many jobs (a test session, an automation
that drives failbacks in-process) can keep one driver instead: DRCTL_SPARK_RESIDENT=1. The
driver (`python -m drctl.gap.job --serve HOME`) reads plan files on its stdin and runs them in
turn; each job's events end with {"event": "end"}.

A JVM fixes its classpath, master and options when it starts, so a driver serves only plans
whose `SparkJobSettings` are the ones it started with; another set replaces it. Local masters
only (a cluster's executors are shared with other jobs), never with --debug (Spark's output
then streams to the operator) and never while the class archive records (the archive is
written as the JVM exits). The driver ends with its stdin: when this process exits, or is
killed, it goes too.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from drctl.gap.plan import SparkJobSettings

ENV_SWITCH = "DRCTL_SPARK_RESIDENT"


def wanted(settings: SparkJobSettings, recording: bool) -> bool:
    """Whether a job with `settings` runs in the resident driver (`recording`: the class
    archive is being recorded)."""
    on = os.environ.get(ENV_SWITCH, "").strip().lower() in ("1", "true", "yes", "on")
    return on and settings.master.startswith("local") and not settings.debug \
        and not recording


class ResidentDriver:
    def __init__(self, settings: SparkJobSettings, env: dict[str, str]) -> None:
        self.settings = settings
        self.home = Path(tempfile.mkdtemp(prefix="drctl-spark-driver-"))
        self.log = self.home / "driver.log"
        read_fd, write_fd = os.pipe()
        try:
            with self.log.open("w") as log_fh:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "drctl.gap.job", "--serve", str(self.home),
                     "--events-fd", str(write_fd)],
                    pass_fds=(write_fd,), stdin=subprocess.PIPE, stdout=log_fh,
                    stderr=log_fh, env=env, text=True)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self._events: IO[str] = os.fdopen(read_fd, "r")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, plan_file: Path) -> Iterator[dict[str, Any]]:
        """The job's events, until its "end"; they stop early when the driver dies (or is
        stopped: see `stop`)."""
        assert self.proc.stdin is not None
        ended = False
        try:
            self.proc.stdin.write(f"{plan_file}\n")
            self.proc.stdin.flush()
            for line in self._events:
                event = json.loads(line)
                if event.get("event") == "end":
                    ended = True
                    return
                yield event
        except OSError:
            return  # the driver is gone: the job ends without a result
        finally:
            if not ended:  # its stream holds the rest of this job: no later job may read it
                self.kill()

    def stop(self) -> None:
        """Stdin's end lets the driver stop Spark; SIGTERM and SIGKILL when it does not."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        self._events.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def kill(self) -> None:
        """For a job past its timeout: the driver goes, and the next job starts another."""
        if self.proc.poll() is None:
            self.proc.kill()


_lock = threading.Lock()
_driver: ResidentDriver | None = None


def driver_for(settings: SparkJobSettings, env: dict[str, str]) -> ResidentDriver:
    """The running driver for `settings`, started (or replaced) when needed."""
    global _driver
    with _lock:
        if _driver is not None and (_driver.settings != settings or not _driver.alive()):
            _driver.stop()
            _driver = None
        if _driver is None:
            _driver = ResidentDriver(settings, env)
        return _driver


@atexit.register
def stop_driver() -> None:
    global _driver
    with _lock:
        if _driver is not None:
            _driver.stop()
            _driver = None


def current() -> ResidentDriver | None:
    """The driver up now, if any (for status lines and tests)."""
    return _driver
