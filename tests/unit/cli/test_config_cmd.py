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
