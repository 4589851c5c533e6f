"""`drctl guard --metrics-port` (drctl/cli/guard_cmd.py): the endpoint serves while guard
runs and closes with it; a port already taken is a usage error."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from drctl.cli import guard_cmd
from drctl.cli.app import main
from drctl.metrics import Metrics, record_guard_round
from tests.unit.cli.support import unreachable_config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_metrics_are_served_while_guard_runs_and_stop_with_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    scraped: list[str] = []

    def run_guard(ctx: Any, *, metrics: Metrics | None, **_: Any) -> list[Any]:
        assert metrics is not None
        record_guard_round(metrics, "a->b", seconds=0.25, ok=True)
        url = f"http://127.0.0.1:{port}/metrics"
        scraped.append(urllib.request.urlopen(url, timeout=10).read().decode())
        return []

    monkeypatch.setattr(guard_cmd, "run_guard", run_guard)
    assert main(["--config", str(unreachable_config(tmp_path)), "guard", "--metrics-port",
                 str(port)]) == 0
    assert 'drctl_guard_rounds_total{result="ok"} 1.0' in scraped[0]
    assert f"metrics on http://127.0.0.1:{port}/metrics" in capsys.readouterr().err
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), 2):
        pass


def test_a_metrics_port_in_use_is_a_usage_error(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["--config", str(unreachable_config(tmp_path)), "guard", "--once",
                     "--metrics-port", str(port)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"Cannot serve metrics on 127.0.0.1:{port}" in err and "--metrics-port" in err


def test_sigterm_and_ctrl_c_stop_guard_while_it_runs_and_the_process_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While guard runs, SIGTERM finishes its round and ends it (exit 0); once it is done the
    process's own handlers are back: a runbook or a test that ran guard in its process is
    stopped by SIGTERM and Ctrl-C again."""
    import os
    import signal

    stopped: list[bool] = []

    def run_guard(ctx: Any, *, stop: Any, **_: Any) -> list[Any]:
        os.kill(os.getpid(), signal.SIGTERM)  # delivered before the next bytecode
        stopped.append(stop.is_set())
        return []

    def own(*_: object) -> None:
        raise AssertionError("not reached")

    monkeypatch.setattr(guard_cmd, "run_guard", run_guard)
    before = {sig: signal.signal(sig, own) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert main(["--config", str(unreachable_config(tmp_path)), "guard"]) == 0
        assert stopped == [True]
        assert signal.getsignal(signal.SIGTERM) is own
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
