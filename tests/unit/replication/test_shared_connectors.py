"""What drctl does to the flow's shared connectors (drctl/replication/connect.py): the exact
entries that leave an application out, planned against what the connector and the worker say
(whether MirrorMaker 2 still reads its old `topics.blacklist`: the worker's own validation,
else its version as its vendor writes it), written and taken out with each connector left as
it ran — and a connector stopped for a moment always resumed, or the flow named unprotected
with the command that resumes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from drctl.config import parse_config
from drctl.errors import CheckFailed, ExitStatus, Unreachable
from drctl.kafka.connect_rest import ConnectError, ConnectorMissing, ConnectRejected
from drctl.replication import connect, mirrormaker2
from drctl.replication.base import FlowContext, FlowPart, ReturnRequest
from drctl.replication.connect import LeftStopped
from drctl.replication.mirrormaker2 import MirrorMaker2

REP = parse_config({
    "clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
    "replication": {"kind": "mirrormaker2", "source": "a", "target": "b",
                    "connect": {"url": "http://c:8083", "source_connector": "src",
                                "checkpoint_connector": "cp"}}}).require_replication()
PART = FlowPart("billing", ("invoices",), ("billing-app",))

# What `PUT /connector-plugins/MirrorSourceConnector/config/validate` lists (a part of it):
# Kafka 3.x still defines the old names, Kafka 4.0 dropped them.
KAFKA_3_SOURCE_KEYS = {"name", "connector.class", "tasks.max", "source.cluster.alias",
                       "target.cluster.alias", "topics", "topics.exclude", "topics.blacklist",
                       "config.properties.exclude", "config.properties.blacklist",
                       "replication.policy.class"}
KAFKA_4_SOURCE_KEYS = KAFKA_3_SOURCE_KEYS - {"topics.blacklist", "config.properties.blacklist"}


@dataclass
class FakeConnect:
    """Kafka Connect's REST calls drctl makes, from memory; `fail_on` makes one call
    unreachable."""

    configs: dict[str, dict[str, str]]
    version: str = "4.3.1"
    # The source connector plugin's keys as its validation lists them, or the HTTP status the
    # worker answers that request with (an old worker, a proxy, RBAC).
    validates: set[str] | int = field(default_factory=lambda: set(KAFKA_4_SOURCE_KEYS))
    validated: list[str] = field(default_factory=list)  # the plugins asked
    states: dict[str, str] = field(default_factory=dict)
    fail_on: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    offsets: dict[str, list[Any]] = field(default_factory=dict)
    url: str = "http://c:8083"

    def _call(self, what: str) -> None:
        self.calls.append(what)
        if what in self.fail_on:
            raise Unreachable(f"Kafka Connect at {self.url} did not answer: {what}")

    def info(self) -> dict[str, Any]:
        return {"version": self.version}

    def plugin_config_keys(self, plugin: str, connector_class: str) -> set[str] | None:
        self.validated.append(plugin)
        assert connector_class.endswith(f".{plugin}")
        if isinstance(self.validates, int):
            if self.validates in (401, 403):
                raise ConnectRejected(f"refused ({self.validates})")
            raise ConnectError(f"answered {self.validates}", self.validates)
        return set(self.validates)

    def config(self, name: str) -> dict[str, str]:
        if name not in self.configs:
            raise ConnectorMissing("missing", 404)
        return dict(self.configs[name])

    def put_config(self, name: str, config: dict[str, str]) -> None:
        self._call(f"put {name}")
        self.configs[name] = dict(config)

    def status(self, name: str) -> dict[str, Any]:
        state = self.states.get(name, "RUNNING")
        return {"connector": {"state": state},
                "tasks": [{"state": "RUNNING"}] if state == "RUNNING" else []}

    def connector_state(self, name: str) -> tuple[str, list[str]]:
        st = self.status(name)
        return st["connector"]["state"], [t["state"] for t in st["tasks"]]

    def stop(self, name: str) -> None:
        self._call(f"stop {name}")
        self.states[name] = "STOPPED"

    def resume(self, name: str) -> None:
        self._call(f"resume {name}")
        self.states[name] = "RUNNING"

    def alter_offsets(self, name: str, offsets: list[Any]) -> None:
        self._call(f"offsets {name}")
        self.offsets[name] = offsets


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> FakeConnect:
    fake = FakeConnect({"src": {"topics": ".*", "topics.blacklist": "pii\\..*"},
                        "cp": {"groups": ".*", "groups.exclude": "test-.*"}})
    for module in (connect, mirrormaker2):
        monkeypatch.setattr(module, "connect_client", lambda *_a, **_k: fake)
    return fake


def test_an_application_is_left_out_and_taken_back_exactly(worker: FakeConnect) -> None:
    before = {n: dict(c) for n, c in worker.configs.items()}
    kind = MirrorMaker2()
    edits = kind.plan_leave_out(REP, PART)
    assert edits is not None
    by_key = {(e.connector, e.key): e for e in edits}
    # Kafka 4 ignores topics.blacklist: the key is written from MirrorMaker 2's default.
    assert by_key[("src", "topics.exclude")].seed == tuple(
        kind.exclusion_defaults["topics.exclude"].split(","))
    assert by_key[("cp", "groups.exclude")].seed is None  # set by the operator
    assert kind.write_edits(REP, edits) == ["src", "cp"]
    assert worker.configs["src"]["topics.blacklist"] == "pii\\..*"
    assert worker.configs["cp"]["groups.exclude"] == "test-.*,billing\\-app"
    assert kind.edits_hold(REP, edits) is True
    # Running connectors were stopped, reconfigured and resumed; they run again.
    assert worker.calls[:3] == ["stop src", "put src", "resume src"]
    assert worker.states == {"src": "RUNNING", "cp": "RUNNING"}
    kind.write_edits(REP, edits, undo=True)
    assert worker.configs == before
    assert kind.edits_hold(REP, edits) is False


@pytest.mark.parametrize(("version", "validates", "reads_old_names"), [
    # Confluent Platform 7.6.1 is Kafka 3.6: its MirrorMaker 2 reads topics.blacklist.
    ("7.6.1-ccs", KAFKA_3_SOURCE_KEYS, True),
    ("7.6.1-ccs", 404, True),  # a worker that cannot validate: its version, read as CP's
    ("7.6.1-ce", 403, True),
    ("7.9.0-ce", 500, True),
    # Confluent Platform 8.0 is Kafka 4.0: the old names are gone.
    ("8.0.0-ccs", KAFKA_4_SOURCE_KEYS, False),
    ("8.0.0-ccs", 404, False),
    ("3.9.1", KAFKA_3_SOURCE_KEYS, True),
    ("3.9.0-SNAPSHOT", 404, True),
    ("4.3.1", KAFKA_4_SOURCE_KEYS, False),
    ("4.3.1", 405, False),
    # The worker's own answer wins over a version that says otherwise (a proxy's).
    ("4.3.1", KAFKA_3_SOURCE_KEYS, True),
    ("7.6.1-ccs", KAFKA_4_SOURCE_KEYS, False),
    # A version no Apache release has, without a vendor's mark: taken as the oldest.
    ("7.6.1", 404, True),
])
def test_the_old_alias_is_what_the_new_key_starts_from_while_the_worker_reads_it(
        worker: FakeConnect, version: str, validates: set[str] | int,
        reads_old_names: bool) -> None:
    """Issue 51: a Confluent Platform 7.6.1 worker (`7.6.1-ccs`) was read as Kafka 7, its
    `topics.blacklist` as dropped: the topics.exclude drctl wrote made it ignore the
    blacklist, and the topics the operator left out replicated until the return."""
    worker.version, worker.validates = version, validates
    before = {n: dict(c) for n, c in worker.configs.items()}
    kind = MirrorMaker2()
    edits = kind.plan_leave_out(REP, PART)
    assert edits is not None
    src = next(e for e in edits if (e.connector, e.key) == ("src", "topics.exclude"))
    default = tuple(kind.exclusion_defaults["topics.exclude"].split(","))
    assert src.seed == (("pii\\..*",) if reads_old_names else default)
    assert worker.validated == ["MirrorSourceConnector"]  # asked once
    kind.write_edits(REP, edits)
    # Kafka 3.x reads topics.exclude once it is set: it still leaves pii out.
    assert worker.configs["src"]["topics.exclude"] == ",".join(
        (*(("pii\\..*",) if reads_old_names else default), "invoices"))
    kind.write_edits(REP, edits, undo=True)
    assert worker.configs == before


def test_the_worker_is_not_asked_when_no_old_name_is_set(worker: FakeConnect) -> None:
    worker.configs["src"] = {"topics": ".*"}
    assert MirrorMaker2().plan_leave_out(REP, PART) is not None
    assert worker.validated == []


def test_a_worker_that_does_not_answer_the_validation_is_unreachable(
        worker: FakeConnect, monkeypatch: pytest.MonkeyPatch) -> None:
    def gone(*_args: object) -> None:
        raise Unreachable("Kafka Connect at http://c:8083 did not answer")

    monkeypatch.setattr(worker, "plugin_config_keys", gone)
    with pytest.raises(Unreachable):
        MirrorMaker2().plan_leave_out(REP, PART)


def test_a_stopped_connector_stays_stopped_when_its_entries_change(worker: FakeConnect) -> None:
    """Inside an open whole-flow incident the connectors are held stopped: taking an
    application's entries out must not resume them."""
    kind = MirrorMaker2()
    edits = kind.plan_leave_out(REP, PART)
    assert edits is not None
    kind.write_edits(REP, edits)
    worker.states = {"src": "STOPPED", "cp": "STOPPED"}
    worker.calls.clear()
    kind.write_edits(REP, edits, undo=True)
    assert worker.calls == ["put src", "put cp"]
    assert worker.states == {"src": "STOPPED", "cp": "STOPPED"}


def test_a_connector_stopped_for_a_moment_is_resumed_whatever_happens(
        worker: FakeConnect) -> None:
    request = _left_out()
    worker.fail_on = {"offsets src"}
    worker.calls.clear()
    with pytest.raises(Unreachable):
        MirrorMaker2().set_forward_start(cast(FlowContext, _Ctx()), request, lambda _: None)
    # The offsets could not be set; the rest of the flow copies again all the same.
    assert worker.calls == ["stop src", "offsets src", "resume src"]
    assert worker.states["src"] == "RUNNING"


def test_a_resume_that_fails_names_the_unprotected_flow_and_the_fix(
        worker: FakeConnect) -> None:
    request = _left_out()
    worker.fail_on = {"resume src"}
    with pytest.raises(LeftStopped) as caught:
        MirrorMaker2().set_forward_start(cast(FlowContext, _Ctx()), request, lambda _: None)
    err = caught.value
    assert "src stayed stopped" in err.message and "unprotected" in err.message
    assert "curl -X PUT http://c:8083/connectors/src/resume" in (err.hint or "")
    assert err.exit_status == ExitStatus.UNREACHABLE
    assert worker.offsets["src"]  # what was asked was done; only the resume failed


class _Ctx:
    rep = REP


def _left_out() -> ReturnRequest:
    """The application left out of the connectors, and its return's request."""
    edits = tuple(MirrorMaker2().plan_leave_out(REP, PART) or ())
    MirrorMaker2().write_edits(REP, edits)
    return ReturnRequest("fo-1", [], {"invoices": {0: 5}}, out_dir=Path("."), part=PART,
                         edits=edits)


def test_entries_that_miss_a_topic_the_application_gained_do_not_hold(
        worker: FakeConnect) -> None:
    """A `--new-incident` that inherited its entries before its application gained a topic:
    every recorded entry is in the connectors, yet the part is not left out — and with names
    kept its reverse flow is not started on that topic while the forward flow copies it."""
    kind = MirrorMaker2()
    edits = kind.plan_leave_out(REP, PART)
    assert edits is not None
    kind.write_edits(REP, edits)
    grown = FlowPart(PART.name, ("invoices", "refunds"), PART.groups)
    assert kind.edits_hold(REP, edits) is True
    assert kind.edits_hold(REP, edits, PART) is True
    assert kind.edits_hold(REP, edits, grown) is False
    kept = parse_config({
        "clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "a", "target": "b",
                        "rename": "{topic}",
                        "connect": {"url": "http://c:8083", "source_connector": "src",
                                    "checkpoint_connector": "cp"}}}).require_replication()
    kind._refuse_cycle(kept, "rev", edits, PART)
    with pytest.raises(CheckFailed, match="form a cycle"):
        kind._refuse_cycle(kept, "rev", edits, grown)


def test_the_forward_flow_is_read_and_resumed_through_its_owner(worker: FakeConnect) -> None:
    """Connect's REST API as the connectors' owner (connect.ConnectRestOwner): the flow read,
    then resumed and confirmed running with its tasks."""
    worker.states.update({"src": "STOPPED", "cp": "STOPPED"})
    kind = MirrorMaker2()
    stopped = kind.forward_state(REP)
    assert stopped.confirmed and stopped.components == {"src": "STOPPED", "cp": "STOPPED"}
    said: list[str] = []
    running = kind.resume_forward(REP, said.append)
    assert running.copying == ("src", "cp")
    assert worker.calls == ["resume src", "resume cp"]
    assert said == ["Resuming src", "Resuming cp"]
    assert kind.resume_components(REP, [], said.append).readable is False
