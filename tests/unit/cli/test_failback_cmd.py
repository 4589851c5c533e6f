"""`drctl failback`'s options (drctl/cli/failback_cmd.py): usage errors come before any
cluster is asked."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from drctl.cli.app import main
from drctl.errors import ExitStatus


def test_bad_reconcile_mode_is_a_usage_error_without_traceback(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["failback", "--reconcile", "copy-everything", "--yes"]) == 2
    err = capsys.readouterr().err
    assert "copy-everything" in err and "Traceback" not in err


def _failback_config(tmp_path: Path, bootstrap: str) -> Path:
    cfg = tmp_path / "drctl.yaml"
    cfg.write_text(f"clusters:\n  a: {{bootstrap.servers: '{bootstrap}'}}\n"
                   f"  b: {{bootstrap.servers: '{bootstrap}'}}\n"
                   "replication: {kind: mirrormaker2, source: a, target: b}\n"
                   f"state: {{dir: '{tmp_path / 'state'}'}}\n"
                   "retry: {initial_s: 0.2}\n")
    return cfg


@pytest.mark.parametrize("reconcile", [[], ["--reconcile", "copy-safe"]])
def test_failback_no_check_order_with_copy_safe_is_a_usage_error_before_any_cluster(
        reconcile: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A black-hole address: asking it anything would take the whole 30 s deadline.
    cfg = _failback_config(tmp_path, "10.255.255.1:9092")
    started = time.monotonic()
    # No --yes either: the usage error comes before the confirmation.
    assert main(["--config", str(cfg), "failback", "--no-check-order", *reconcile,
                 "--deadline", "30"]) == ExitStatus.USAGE
    assert time.monotonic() - started < 10
    err = " ".join(capsys.readouterr().err.split())
    assert "--no-check-order cannot go with --reconcile copy-safe" in err
    assert "Use --reconcile quarantine" in err and "--reconcile none" in err


def test_failback_no_check_order_with_quarantine_goes_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Past the option check failback looks for the open failover: no cluster listens on
    # port 9, so the state topic cannot be read — unknown, never "no incident".
    cfg = _failback_config(tmp_path, "127.0.0.1:9")
    assert main(["--config", str(cfg), "failback", "--no-check-order", "--reconcile",
                 "quarantine", "--yes", "--deadline", "1"]) == ExitStatus.UNREACHABLE
    err = " ".join(capsys.readouterr().err.split())
    assert "cluster 'b' at 127.0.0.1:9 did not answer" in err, err
    assert "The failover markers in its topic _drctl_state are unknown until it answers" in err
    assert "No open incident" not in err and "--no-check-order" not in err
