"""drctl end to end on the secured lab (issue 13): errors that name the cause, Connect's REST API
over HTTPS with basic auth, the gap job in Spark with mTLS PEM and with OAUTHBEARER, and the
whole DR drill (failover, gap analysis in Spark, failback) over SASL_SSL with SCRAM-SHA-512."""

from __future__ import annotations

import contextlib
import io
import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.cli.app import main
from drctl.gap.result import GapResult
from drctl.kafka.records import read_all
from drctl.lab.workload import create_topics
from drctl.resources import runbooks_dir
from tests.conftest import (
    RunningLab,
    grant_reverse_flow,
    restore_forward_replication,
    revoke_reverse_flow,
)

pytestmark = [pytest.mark.lab, pytest.mark.spark]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


def altered_config(running: RunningLab, tmp_path: Path, change: dict[str, Any]) -> Path:
    """The lab's drctl.yaml with `change` applied: {"clusters|primary|sasl.password": v}
    (keys joined by | since property names hold dots)."""
    raw = yaml.safe_load(running.config_file.read_text())
    for dotted, value in change.items():
        *parents, last = dotted.split("|")
        node = raw
        for key in parents:
            node = node[key]
        node[last] = value
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "drctl.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_wrong_password_and_bad_ca_name_the_cause(secure_lab: RunningLab,
                                                  tmp_path: Path) -> None:
    wrong = altered_config(secure_lab, tmp_path / "pw",
                           {"clusters|primary|sasl.password": "not-the-password"})
    status, out, err = run("--config", str(wrong), "config", "check")
    assert status in (2, 4), err
    assert "authentication failed" in err.lower() and "'primary'" in err, err
    assert "retrying in" not in err, err  # a refusal, said at once: never waited for
    assert "not-the-password" not in out + err

    missing = tmp_path / "nowhere" / "ca.pem"
    bad_ca = altered_config(secure_lab, tmp_path / "ca",
                            {"clusters|secondary|ssl.ca.location": str(missing)})
    status, _, err = run("--config", str(bad_ca), "config", "check")
    assert status == 2, err
    assert str(missing) in err and "clusters.secondary.ssl.ca.location" in err, err


def test_connect_rest_over_https_with_basic_auth(secure_lab: RunningLab,
                                                 tmp_path: Path) -> None:
    connect = yaml.safe_load(secure_lab.config_file.read_text())["replication"]["connect"]
    assert connect["url"].startswith("https://") and connect["ca_file"]
    assert connect["password"].startswith("${file:")
    status, out, err = run("--config", str(secure_lab.config_file), "--output", "json",
                           "status")
    assert status == 0, err
    connectors = json.loads(out)["replication"]["connectors"]
    assert len(connectors) == 3 and set(connectors.values()) == {"RUNNING"}, connectors

    wrong = altered_config(secure_lab, tmp_path,
                           {"replication|connect|password": "not-the-password"})
    status, _, err = run("--config", str(wrong), "status")
    assert status == 2, err
    assert f"Kafka Connect at {connect['url']} refused drctl" in err and "401" in err, err
    assert "not-the-password" not in err


def test_gap_job_reads_with_mtls_pem_and_oauthbearer(secure_lab: RunningLab, ns: str,
                                                     tmp_path: Path) -> None:
    """A known gap: the target cut at offsets 6 and 4 (--target-end) of 10 records per
    partition. The source is reached with a client certificate on the brokers' SSL listener, the
    target with an unsecured OAUTHBEARER token: both logins, in Spark's Java client as in
    drctl's."""
    topic = f"{ns}-gap"
    create_topics(secure_lab.primary, (topic,), 2)
    producer = secure_lab.primary.producer()
    for i in range(20):
        producer.produce(topic, key=f"k-{i}".encode(), value=f"v-{i}".encode(),
                         partition=i % 2)
    assert producer.flush(30) == 0
    end = time.monotonic() + 60
    while len(read_all(secure_lab.secondary, topic)) < 20:
        assert time.monotonic() < end, "not replicated in time"
        time.sleep(0.5)
    target_end = json.dumps({topic: {"0": 6, "1": 4}})
    expected = {(0, f"k-{i}") for i in range(12, 20, 2)} | {(1, f"k-{i}")
                                                             for i in range(9, 20, 2)}
    # One Spark run proves both logins: the source read over mTLS, the target with OAUTHBEARER.
    mixed = yaml.safe_load(secure_lab.lab.secure_config_file("mtls").read_text())
    oauth = yaml.safe_load(secure_lab.lab.secure_config_file("oauthbearer").read_text())
    mixed["clusters"]["secondary"] = oauth["clusters"]["secondary"]
    assert mixed["clusters"]["primary"]["security.protocol"] == "SSL"
    assert mixed["clusters"]["secondary"]["sasl.mechanism"] == "OAUTHBEARER"
    config = tmp_path / "drctl-mtls-oauthbearer.yaml"
    config.write_text(yaml.safe_dump(mixed))
    out_dir = tmp_path / "gap"
    status, out, err = run("--config", str(config), "--output", "json", "gap-analysis",
                           "--topics", topic, "--target-end", target_end,
                           "--report-dir", str(out_dir))
    assert status == 0, err[-3000:]
    assert json.loads(out)["totals"]["unreplicated"] == len(expected)
    found = {(r.partition, (r.key or b"").decode())
             for r in GapResult.load(out_dir).iter_records()}
    assert found == expected


def test_drill_runbook_passes_every_check_over_sasl_ssl_scram(
        secure_lab: RunningLab, tmp_path: Path) -> None:
    """The shipped drill (what test_drill_faults.py runs under faults on the plain labs) with
    drctl.yaml's SASL_SSL/SCRAM-SHA-512 clusters and Connect over HTTPS."""
    config = yaml.safe_load(secure_lab.config_file.read_text())
    assert config["clusters"]["primary"]["sasl.mechanism"] == "SCRAM-SHA-512"
    junit = tmp_path / "drill.xml"
    grant_reverse_flow(secure_lab)  # the operator's part of failback on a secured cluster
    try:
        status, _, err = run("--config", str(secure_lab.config_file), "runbook", "run",
                             str(runbooks_dir() / "drill.yaml"), "--yes", "--junit",
                             str(junit), "--var", "records=500", "--var", "gap_records=30")
        assert status == 0, err[-4000:]
    finally:
        revoke_reverse_flow(secure_lab)
        restore_forward_replication(secure_lab)
    names = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    for check in ("gap_found_exactly", "gap_reconciled", "no_group_lost_or_duplicated",
                  "no_record_skipped", "every_group_switched_back", "incident_closed"):
        assert check in names and names[check].find("failure") is None, check
    assert all(c.find("failure") is None for c in names.values())
