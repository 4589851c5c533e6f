"""`drctl status` (drctl/cli/status_cmd.py) with nothing reachable: it answers by its
deadline, with progress."""

from __future__ import annotations

import json

import pytest

from drctl.cli.app import main


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
    # Without the deadline the clients' own 30 s timeouts: a bound with room for a loaded CI.
    assert time.monotonic() - started < 15  # deadline, grace, rendering
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert "Asking a, b, replication in parallel (deadline 2 s)" in err
    # One line per part that did not answer: where, and the cause in words (librdkafka's
    # own text only with --debug).
    assert "cluster 'a' at 127.0.0.1:9 did not answer: connection refused (" in err
    assert "Kafka Connect at http://127.0.0.1:9 did not answer: connection refused (" in err
    assert "ipv4#" not in err and "CONNECT)" not in err
    # The data, on stdout: plain columns when piped, each error in its own column.
    lines = captured.out.splitlines()
    assert lines[1].split() == ["CLUSTER", "REACHABLE", "CLUSTER_ID", "BROKERS", "RTT_MS",
                                "ERROR"]
    assert lines[2].split() == ["a", "NO", "-", "-", "-", "connection", "refused"]
    assert any(line.split() == ["src", "NO", "ANSWER"] for line in lines), lines
    # The incidents live in the state topic on 'b': with 'b' silent they are unknown.
    assert "Open incidents: unknown — the state topic _drctl_state is on 'b', which did " \
        "not answer" in err, err
    assert "No cluster answered (a, b)." in err
    assert main(["--config", str(cfg), "-o", "json", "status", "--deadline", "1"]) == 4
    out = json.loads(capsys.readouterr().out)
    assert out["markers_from"].startswith("unknown: the state topic _drctl_state is on 'b'")
    assert not any(c["reachable"] for c in out["clusters"].values())
