"""Connectors set up years ago, on a Kafka 3.9 lab (issue 51): MirrorMaker 2's source and
checkpoint connectors keep their exclude lists under the old names, `topics.blacklist` and
`groups.blacklist` (`lab up --kafka-version 3.9.x --legacy-keys`), and the operator left
`secret.*` topics and `secret-*` groups out with them. drctl reaches the worker through a
pass-through proxy that answers `GET /` as a Confluent Platform 7.6.1 worker does
(`7.6.1-ccs`: Kafka 3.6), everything else as the 3.9 worker does.

One application's whole cycle from a config `config init` wrote from those connectors —
`check`, `failover --app A`, `failback`, `reprotect` — while a producer writes to a
blacklisted topic the whole time: every record of A and B is where it belongs, once; not one
record of the blacklisted topic reaches the secondary, and no checkpoint names the
blacklisted group; every key of both connectors is as before at the end. drctl read the
version as Kafka 7 before (its old names taken for dropped ones): the topics.exclude it wrote
made the worker ignore the blacklist, and the secret topic replicated during A's incident.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from drctl.kafka.checkpoints import read_checkpoints
from drctl.kafka.connect_rest import ConnectClient
from drctl.kafka.mm2_connectors import GROUPS_EXCLUDE, TOPICS_EXCLUDE
from drctl.kafka.records import read_all
from drctl.lab.lab import Lab, LabPorts
from drctl.lab.workload import create_topics
from drctl.replication.connect import reconfigure
from drctl.replication.mirrormaker2 import MirrorMaker2
from tests.conftest import PORT_BASE, RunningLab
from tests.lab.connect_proxy import version_proxy
from tests.lab.support import fresh_clients, produce, run_json, wait_tasks_assigned
from tests.lab.test_app_scope import _commit_at_end
from tests.lab.test_reprotect import PARTS, _send, _wait_same

pytestmark = [pytest.mark.lab, pytest.mark.spark]
BASE, GAP, POST = 30, 10, 20
# Clear of the shared labs (+ 0 .. + 90) and the Kafka 3.9 ones (+ 100, + 110): conftest.py.
LEGACY_BASE = PORT_BASE + 120


@pytest.fixture(scope="module")
def legacy_lab(spark_remote: str, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[RunningLab]:
    """A Kafka 3.9 lab whose MirrorMaker 2 connectors use the old key names; its gap jobs
    run on the session's Spark Connect server."""
    lab = Lab(tmp_path_factory.mktemp("legacy-lab"))
    try:
        state = lab.up(ports=LabPorts(LEGACY_BASE, LEGACY_BASE + 2, LEGACY_BASE + 4,
                                      LEGACY_BASE + 5),
                       kafka_version="3.9.x", legacy_keys=True, spark_connect=spark_remote)
        assert state.kafka_version.startswith("3.9.") and state.legacy_keys
        yield RunningLab(lab, state)
    finally:
        lab.down(discard=True)  # a test's lab, done with: killed, not shut down


class _Writer:
    """A producer writing to the blacklisted topic the whole time."""

    def __init__(self, lab: RunningLab, topic: str) -> None:
        self.lab, self.topic = lab, topic
        self.sent = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _write(self) -> None:
        clients = fresh_clients(self.lab, "primary")
        while not self.stop.is_set():
            produce(clients, self.topic, [(self.sent % PARTS, f"s-{self.sent}".encode(),
                                           b"secret")])
            self.sent += 1
            self.stop.wait(0.2)

    def finish(self) -> int:
        self.stop.set()
        self.thread.join(30)
        return self.sent


def test_blacklisted_topics_never_replicate_through_one_applications_cycle(
        legacy_lab: RunningLab, ns: str, tmp_path: Path) -> None:
    lab = legacy_lab
    a1, b1, secret = f"{ns}-a1", f"{ns}-b1", f"secret.{ns}"
    a_group, b_group, secret_group = f"{ns}-a-app", f"{ns}-b-app", f"secret-{ns}"
    worker = ConnectClient(lab.lab.connect_url(lab.state))  # retried while it rebalances
    names = lab.lab.flow(lab.state).connector_names()
    src, cp = names["source"], names["checkpoint"]
    # The operator's own entries, under the old names; each connector stopped, reconfigured
    # and resumed: no task copies with the lab's list once this returns.
    for name, extra in ((src, {"topics.blacklist": TOPICS_EXCLUDE + r",secret\..*"}),
                        (cp, {"topics.blacklist": TOPICS_EXCLUDE + r",secret\..*",
                              "groups.blacklist": GROUPS_EXCLUDE + ",secret-.*"})):
        config = worker.config(name)
        assert "topics.exclude" not in config and "groups.exclude" not in config, config
        assert reconfigure(worker, name, lambda cfg, extra=extra: {**cfg, **extra})
    before = {n: worker.config(n) for n in (src, cp)}

    create_topics(lab.primary, (a1, b1, secret), PARTS)
    for t in (a1, b1):
        lab.wait_mirror_topic(t)
    wait_tasks_assigned(lab, a1, b1)
    writer = _Writer(lab, secret)
    with version_proxy(lab.lab.connect_url(lab.state), "7.6.1-ccs") as proxy:
        try:
            for t in (a1, b1):
                _send(fresh_clients(lab, "primary"), t, "base", BASE)
            for t in (a1, b1):
                _wait_same(lab, t)
            _commit_at_end(lab, "primary", a_group, [a1])
            _commit_at_end(lab, "primary", b_group, [b1])
            _commit_at_end(lab, "primary", secret_group, [b1])  # blacklisted: no checkpoints
            # Checkpointed before `check` reads the groups' positions on the secondary.
            lab.wait_checkpointed(a_group, a1, dict.fromkeys(range(PARTS), BASE))
            lab.wait_checkpointed(b_group, b1, dict.fromkeys(range(PARTS), BASE))
            _cycle(lab, proxy.url, tmp_path, a1, a_group, spark=str(lab.state.spark_connect))
        finally:
            sent = writer.finish()

        assert sent > 50, sent
        for t in (a1, b1):
            _wait_same(lab, t)
        # Not one record of the blacklisted topic on the secondary, no checkpoint of the
        # blacklisted group.
        secondary = fresh_clients(lab, "secondary")
        if secret in secondary.admin().list_topics(timeout=10).topics:
            copied = len(read_all(secondary, secret))
            raise AssertionError(f"{secret} reached the secondary: {copied} of {sent} records")
        checkpoints = read_checkpoints(fresh_clients(lab, "secondary"),
                                       "primary.checkpoints.internal")
        assert not [k for k in checkpoints if k[0] == secret_group], "a blacklisted group"
        assert {(k[0], k[1]) for k in checkpoints} >= {(a_group, a1), (b_group, b1)}
        # Every key of both connectors as before.
        assert {n: worker.config(n) for n in (src, cp)} == before

        # drctl asked the worker itself whether its MirrorMaker 2 reads the old names, and
        # the worker's answer holds whatever its version says (Kafka 4 dropped them).
        assert proxy.asked["PUT /connector-plugins/MirrorSourceConnector/config/validate"] \
            >= 1, proxy.asked
        proxy.version = "8.0.0-ccs"
        assert MirrorMaker2().aliases_honoured(ConnectClient(proxy.url))


def _cycle(lab: RunningLab, connect_url: str, tmp_path: Path, a1: str, a_group: str, *,
           spark: str) -> None:
    """`config init` from the connectors (through `connect_url`), `check`, then A's
    failover, failback and return."""
    config = tmp_path / "drctl.yaml"
    status, out = run_json("config", "init", "--out", str(config),
                           "--primary-bootstrap", lab.lab.bootstrap(lab.state, "primary"),
                           "--secondary-bootstrap", lab.lab.bootstrap(lab.state, "secondary"),
                           "--connect-url", connect_url)
    assert status == 0, out
    raw = yaml.safe_load(config.read_text())
    # What the connectors leave out is the flow's exclude list, the operator's entries too.
    assert r"secret\..*" in raw["replication"]["topics"]["exclude"], raw["replication"]
    assert "secret-.*" in raw["groups"]["exclude"], raw["groups"]
    ns = a1.removesuffix("-a1")
    raw["applications"] = {"A": {"topics": [f"{ns}-a.*"], "groups": [f"{ns}-a-.*"]},
                           "B": {"topics": [f"{ns}-b.*"], "groups": [f"{ns}-b-.*"]}}
    raw["state"] = {"dir": str(tmp_path / "state")}
    raw["spark"] = {"remote": spark}
    raw["retry"] = {"initial_s": 0.2, "max_s": 1}
    config.write_text(yaml.safe_dump(raw))
    c = ["--config", str(config)]

    status, out = run_json(*c, "check")
    assert status == 0, [f for f in out.get("findings", []) if f["severity"] != "note"]
    status, out = run_json(*c, "failover", "--app", "A", "--yes")
    assert status == 0, out
    assert list(out["marker"]["topics"]) == [a1], out["marker"]
    # A's gap (written after its replication stopped) and its writes on the secondary.
    _send(fresh_clients(lab, "primary"), a1, "gap", GAP)
    _send(fresh_clients(lab, "secondary"), a1, "post", POST)
    _commit_at_end(lab, "secondary", a_group, [a1])
    status, out = run_json(*c, "failback", "--app", "A", "--yes")
    assert status == 0, out
    assert out["gap"]["safe"] == GAP * PARTS, out["gap"]
    moved = out["switch_back"]["summary"]
    assert (moved["groups"], moved["applied"], moved["not_delivered"]) == (1, 1, 0), moved
    status, out = run_json(*c, "reprotect", "--app", "A", "--yes", "--settle", "2s")
    assert status == 0 and out["status"] == "closed" and out["verified_ok"], out


def test_down_leaves_no_process_of_the_kafka_3_9_lab(legacy_lab: RunningLab) -> None:
    """After the cycle (this file's tests share the lab, in order: tests/conftest.py
    `_SHARED_SETUP`): `lab down` of a Kafka 3.9 lab stops what `up` started and leaves no
    process behind; a second `down` finds nothing to stop."""
    lab = legacy_lab.lab
    pids = [lab.process(c).pid() for c in ("primary", "secondary", "connect")]
    assert all(pids), pids
    assert lab.down() == ["connect", "secondary", "primary"]
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or \
            "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    assert lab.down() == []  # idempotent
