from __future__ import annotations

import json
import time
from pathlib import Path

import confluent_kafka
import pytest

from drctl import __version__
from drctl.cli.app import main
from drctl.errors import ExitStatus
from drctl.retry import RetriesExhausted, RetryPolicy, retry_call
from drctl.secrets import Redactor, mask_mapping


def test_default_policy_is_debeziums() -> None:
    delays = list(RetryPolicy().delays())
    assert len(delays) == 15  # 16 attempts
    assert delays[:8] == [1, 2, 4, 8, 16, 32, 64, 120] and set(delays[7:]) == {120}


def test_retry_succeeds_after_failures_with_backoff() -> None:
    calls, slept = [], []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("down")
        return "up"

    assert retry_call(flaky, RetryPolicy(initial_s=0.5), sleep=slept.append) == "up"
    assert slept == [0.5, 1.0]


def test_retry_gives_up_at_deadline() -> None:
    now = [0.0]

    def clock() -> float:
        return now[0]

    def sleep(s: float) -> None:
        now[0] += s

    def down() -> None:
        raise ConnectionError("down")

    with pytest.raises(RetriesExhausted) as info:
        retry_call(down, RetryPolicy(deadline_s=10), sleep=sleep, clock=clock)
    # 1 + 2 + 4 = 7 s slept; the next wait (8 s) would pass the 10 s deadline.
    assert info.value.attempts == 4 and now[0] == 7


def test_masking_and_redaction() -> None:
    props = {"bootstrap.servers": "b:9092", "sasl.password": "pw-123456",
             "ssl.key.pem": "-----BEGIN", "nested": {"api.key": "k-99999"}}
    masked = mask_mapping(props)
    assert masked["bootstrap.servers"] == "b:9092"
    assert masked["sasl.password"] == masked["ssl.key.pem"] == masked["nested"]["api.key"]
    assert masked["sasl.password"] == "****"
    assert Redactor(["pw-123456"]).redact("login with pw-123456 failed") == \
        "login with **** failed"


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    lines = dict(line.split(" ", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["drctl"] == __version__
    assert lines["confluent-kafka"] == confluent_kafka.version()
    assert lines["librdkafka"] == confluent_kafka.libversion()[0]
    assert set(lines) == {"drctl", "python", "confluent-kafka", "librdkafka", "pyspark", "java"}
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "lab" in out and "config" in out


@pytest.mark.parametrize("java_says", [None, "", 'openjdk version "21.0.2" 2024-01-16'])
def test_version_reports_java_without_failing(java_says: str | None, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # JAVA_HOME decides which java is asked; None: a JAVA_HOME without one.
    if java_says is not None:
        java = tmp_path / "bin" / "java"
        java.parent.mkdir()
        java.write_text(f"#!/bin/sh\necho '{java_says}' >&2\n")
        java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert main(["--version"]) == 0
    shown = capsys.readouterr().out.splitlines()[-1]
    expected = {None: "java not found (JAVA_HOME or PATH)",
                "": f"java unknown version ({tmp_path}/bin/java)",
                'openjdk version "21.0.2" 2024-01-16': f"java 21.0.2 ({tmp_path}/bin/java)"}
    assert shown == expected[java_says]


def test_unknown_option_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "up", "--no-such-option"]) == 2
    assert "No such option" in capsys.readouterr().err


def test_lab_command_without_lab_is_clear(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "status", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "No lab in" in err and "drctl lab up" in err and "Traceback" not in err


def test_check_unreachable_cluster_exits_4(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "drctl.yaml"
    # Port 9 on loopback: nothing listens there.
    cfg.write_text("clusters:\n  gone: {bootstrap.servers: '127.0.0.1:9'}\n"
                   "retry: {initial_s: 0.2}\n")
    assert main(["--config", str(cfg), "config", "check", "--deadline", "1.5"]) == 4
    err = capsys.readouterr().err
    assert "127.0.0.1:9" in err and "did not answer" in err


@pytest.mark.parametrize(("value", "traceback"), [("0", False), ("false", False), ("", False),
                                                  ("1", True), ("yes", True)])
def test_drctl_debug_is_read_as_a_boolean(value: str, traceback: bool, tmp_path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    monkeypatch.setenv("DRCTL_DEBUG", value)
    try:
        assert main(["lab", "status", "--dir", str(tmp_path)]) == 1
    finally:  # debug mode configures the root logger: leave it as it was for other tests
        root.setLevel(level)
        root.handlers[:] = handlers
    assert ("Traceback" in capsys.readouterr().err) is traceback


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
    assert "Could not read the failover markers in topic _drctl_state on 'b'" in err, err
    assert "No open incident" not in err and "--no-check-order" not in err


def test_status_with_nothing_reachable_answers_by_its_deadline_with_progress(
        tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    import time

    cfg = tmp_path / "drctl.yaml"
    # Port 9 on loopback: nothing listens there, neither Kafka nor Connect.
    cfg.write_text("clusters:\n  a: {bootstrap.servers: '127.0.0.1:9'}\n"
                   "  b: {bootstrap.servers: '127.0.0.1:9'}\n"
                   "replication: {kind: mirrormaker2, source: a, target: b, connect: "
                   "{url: 'http://127.0.0.1:9', source_connector: src}}\n"
                   f"state: {{dir: '{tmp_path / 'state'}'}}\n")
    started = time.monotonic()
    assert main(["--config", str(cfg), "status", "--deadline", "2"]) == 4
    assert time.monotonic() - started < 2 + 1 + 1.5  # deadline, grace, rendering
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "Asking a, b, replication in parallel (deadline 2 s)" in err
    assert "a: no answer after" in err and "Connection refused" in err
    assert "replication: no answer within 2 s" in err
    assert "src       │ NO ANSWER" in captured.out  # the data: on stdout
    # The incidents live in the state topic on 'b': with 'b' silent they are unknown.
    assert "Open incidents: unknown — the state topic _drctl_state is on 'b', which did " \
        "not answer" in err, err
    assert "No cluster answered (a, b)." in err
    assert main(["--config", str(cfg), "-o", "json", "status", "--deadline", "1"]) == 4
    out = json.loads(capsys.readouterr().out)
    assert out["markers_from"].startswith("unknown: the state topic _drctl_state is on 'b'")
    assert not any(c["reachable"] for c in out["clusters"].values())
