"""`drctl config check` (drctl/cli/config_cmd.py): an unreachable cluster, settings the
gap job cannot take, and what MirrorMaker 2's settings cost a failover."""

from __future__ import annotations

from pathlib import Path

import pytest

from drctl.cli.app import main


def test_check_unreachable_cluster_exits_4(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "drctl.yaml"
    # Port 9 on loopback: nothing listens there.
    cfg.write_text("clusters:\n  gone: {bootstrap.servers: '127.0.0.1:9'}\n"
                   "retry: {initial_s: 0.2}\n")
    assert main(["--config", str(cfg), "config", "check", "--deadline", "1.5"]) == 4
    err = capsys.readouterr().err
    assert "127.0.0.1:9" in err and "did not answer" in err


def test_config_check_names_what_the_gap_job_cannot_take(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from drctl.cli.app import main

    cfg = tmp_path / "drctl.yaml"
    cfg.write_text("""\
clusters:
  primary:
    bootstrap.servers: 127.0.0.1:9
    ssl.cipher.suites: ECDHE-RSA-AES128-GCM-SHA256
  secondary:
    bootstrap.servers: 127.0.0.1:9
    enable.ssl.certificate.verification: false
replication: {kind: mirrormaker2, source: primary, target: secondary}
retry: {initial_s: 0.2}
""")
    # Unreachable too (exit 4 alone), but a setting to fix comes first: exit 2.
    assert main(["--config", str(cfg), "config", "check", "--deadline", "1"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "clusters.primary.ssl.cipher.suites: 'ssl.cipher.suites' has no equivalent" in err
    assert "Under clusters.primary.java, set ssl.cipher.suites" in err  # the hint
    assert "secondary: enable.ssl.certificate.verification is false" in err

    cfg.write_text(cfg.read_text().replace(
        "    ssl.cipher.suites: ECDHE-RSA-AES128-GCM-SHA256\n",
        "    ssl.cipher.suites: ECDHE-RSA-AES128-GCM-SHA256\n"
        "    java: {ssl.cipher.suites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}\n"))
    assert main(["--config", str(cfg), "config", "check", "--deadline", "1"]) == 4
    assert "has no equivalent" not in capsys.readouterr().err


def test_config_check_says_what_mirrormaker_settings_cost(
        capsys: pytest.CaptureFixture[str]) -> None:
    from drctl.cli.config_cmd import report_translation_costs
    from drctl.replication.mirrormaker2 import checkpoint_costs
    from drctl.terminal import Terminal

    report_translation_costs(Terminal(), checkpoint_costs(
        {"refresh.topics.interval.seconds": "30"},
        {"emit.checkpoints.interval.seconds": "60", "groups": "orders-.*"}))
    err = " ".join(capsys.readouterr().err.split())
    assert "cost a failover with the source gone" in err
    assert "! Checkpoints every 60 s" in err
    assert "! New groups are found every 600 s" in err  # the default, unset
    assert "! New topics are found every 30 s" in err
    assert "! Only groups matching 'orders-.*' are checkpointed." in err
    assert "Run `drctl guard`" in err


def test_a_misspelt_client_property_is_exit_2_with_the_suggestion(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in a property is the config's fault (exit 2, the key and the closest name),
    found before any cluster is asked — never an outage (exit 4)."""
    import time

    cfg = tmp_path / "drctl.yaml"
    cfg.write_text("clusters:\n  primary:\n    bootstrap.servers: 127.0.0.1:9\n"
                   "    security.protocol: SASL_PLAINTEXT\n    sasl.mechansim: PLAIN\n")
    started = time.monotonic()
    assert main(["--config", str(cfg), "config", "check", "--deadline", "30"]) == 2
    assert time.monotonic() - started < 5  # no cluster was retried
    err = " ".join(capsys.readouterr().err.split())
    assert "clusters.primary.sasl.mechansim: 'sasl.mechansim' is not a Kafka client property" \
        in err
    assert "sasl.mechanism" in err.split("not a Kafka client property", 1)[1]
    assert "did not answer" not in err


def test_config_check_asks_every_cluster_at_once_and_names_each_retry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "drctl.yaml"
    cfg.write_text("clusters:\n  east: {bootstrap.servers: '127.0.0.1:9'}\n"
                   "  west: {bootstrap.servers: 'localhost:9'}\n"
                   "retry: {initial_s: 0.2}\n")
    assert main(["--config", str(cfg), "config", "check", "--deadline", "1"]) == 4
    err = capsys.readouterr().err
    # Each retry names the cluster, its address and the cause in words; the final error
    # says it once per cluster; librdkafka's own text is --debug's.
    assert "east (127.0.0.1:9): connection refused; attempt 1, retrying in 0.2s" in err
    assert "west (localhost:9): connection refused; attempt 1, retrying in 0.2s" in err
    assert "cluster 'east' at 127.0.0.1:9 did not answer: connection refused (" in err
    assert "cluster 'west' at localhost:9 did not answer: connection refused (" in err
    assert "ipv4#" not in err


def test_check_clusters_runs_the_clusters_side_by_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each cluster waits for the other inside its probe: done one after the other, the
    barrier would break."""
    import threading

    from drctl.config import parse_config
    from drctl.kafka import clients
    from drctl.retry import RetryPolicy

    both = threading.Barrier(2, timeout=5)

    def describe(c: clients.ClusterClients, policy: RetryPolicy, on_retry: object = None, *,
                 notify: object = None) -> clients.ClusterInfo:
        both.wait()
        return clients.ClusterInfo(c.name, c.bootstrap, f"id-{c.name}", 3, 1, 2.0)

    monkeypatch.setattr(clients, "describe_with_retry", describe)
    config = parse_config({"clusters": {"b": {"bootstrap.servers": "b:9092"},
                                        "a": {"bootstrap.servers": "a:9092"}}})
    results, failures = clients.check_clusters(config, RetryPolicy())
    assert failures == []
    assert [(r["cluster"], r["cluster_id"]) for r in results] == [("b", "id-b"), ("a", "id-a")]


def test_config_check_bounds_connect_by_the_deadline_and_names_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38: with a Connect URL, `config check --deadline 3s` took 17 s and never said
    that Connect did not answer. Clusters and Connect are asked side by side, all within
    the deadline; the one that did not answer is named, in the table's data and the JSON."""
    import json
    import socket
    import time

    with socket.socket() as silent:  # Connect accepts, then never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        cfg = tmp_path / "drctl.yaml"
        cfg.write_text(f"""\
clusters:
  primary: {{bootstrap.servers: '127.0.0.1:9'}}
  secondary: {{bootstrap.servers: '127.0.0.1:9'}}
replication:
  kind: mirrormaker2
  source: primary
  target: secondary
  connect: {{url: '{url}', source_connector: src,
             checkpoint_connector: cp}}
""")
        started = time.monotonic()
        assert main(["--config", str(cfg), "config", "check", "--deadline", "2s"]) == 4
        took = time.monotonic() - started
        captured = capsys.readouterr()
        assert main(["--config", str(cfg), "-o", "json", "config", "check",
                     "--deadline", "2s"]) == 4
        shown = json.loads(capsys.readouterr().out)
    assert took < 4, took
    err = " ".join(captured.err.split())
    assert f"error: Kafka Connect at {url} did not answer: timed out (" in err
    assert "cluster 'primary' at 127.0.0.1:9 did not answer: connection refused (" in err
    assert shown["connect"] == {"url": url, "reachable": False,
                                "error": shown["connect"]["error"]}
    assert shown["connect"]["error"].startswith(f"Kafka Connect at {url} did not answer")
    assert shown["translation_costs"] is None
