"""The suite's last act (tests/conftest.py `stop_what_a_run_left`): what a run's workers
started and left running — a lab's JVMs, in sessions of their own, when xdist ended a
SIGTERM'd worker before its teardown stopped them — is stopped by the run's id in its
environment, and nothing of another run."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from tests.conftest import stop_what_a_run_left

# A process that takes no notice of SIGTERM, as a JVM stuck in its shutdown; it says so
# once its handler is set (a fixed wait for that would fail on a loaded machine).
_DEAF = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "print('deaf', flush=True); time.sleep(60)")


def _start(run_id: str, code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                            stdout=subprocess.PIPE,
                            env={**os.environ, "DRCTL_TEST_RUN_ID": run_id})


def _gone(proc: subprocess.Popen[bytes], within_s: float = 10) -> bool:
    try:
        proc.wait(within_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_what_the_run_started_is_stopped_and_another_runs_is_not() -> None:
    run, other = uuid.uuid4().hex, uuid.uuid4().hex
    polite = _start(run, "import time; time.sleep(60)")
    deaf = _start(run, _DEAF)
    not_ours = _start(other, "import time; time.sleep(60)")
    try:
        assert deaf.stdout is not None and deaf.stdout.readline() == b"deaf\n"
        found = stop_what_a_run_left(run, grace_s=0.5)
        assert sorted(found) == sorted([polite.pid, deaf.pid])
        assert _gone(polite) and polite.returncode == -15  # SIGTERM
        assert _gone(deaf) and deaf.returncode == -9  # SIGKILL once the grace ran out
        assert not_ours.poll() is None
        assert stop_what_a_run_left(run, grace_s=0.5) == []
    finally:
        for proc in (polite, deaf, not_ours):
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
