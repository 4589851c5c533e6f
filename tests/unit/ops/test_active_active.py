"""The active-active topology (drctl/ops/active_active/, `topology:` in drctl/config.py): two
flows one each way, the naming loop refused by `config check` (exit 2) and `failover`
(exit 3) before anything is asked of a cluster, the topics and groups of a region."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.cli.app import main
from drctl.config import config_as_data, load_config, parse_config
from drctl.errors import ConfigError, UsageError
from drctl.ops.active_active.checkpoints import compare
from drctl.ops.active_active.failover import groups_regex
from drctl.ops.active_active.pair import Pair


def _flow(source: str, target: str, rename: str | None = None) -> dict[str, Any]:
    return {"kind": "mirrormaker2", "source": source, "target": target,
            "rename": rename if rename is not None else f"{source}.{{topic}}"}


def _raw(rename_a: str | None = None, rename_b: str | None = None,
         **topology: Any) -> dict[str, Any]:
    return {"clusters": {"primary": {"bootstrap.servers": "127.0.0.1:9"},
                         "secondary": {"bootstrap.servers": "127.0.0.1:9"}},
            "retry": {"initial_s": 0.2},
            "topology": {"kind": "active-active",
                         "flows": [_flow("primary", "secondary", rename_a),
                                   _flow("secondary", "primary", rename_b)], **topology}}


def _write(tmp_path: Path, raw: dict[str, Any]) -> Path:
    raw = {**raw, "state": {"dir": str(tmp_path / "state")}}
    path = tmp_path / "drctl.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_topology_parses_two_flows_one_each_way() -> None:
    config = parse_config(_raw(regions={"primary": {"groups": {"include": ["app-.*"]}}}))
    assert config.replication is None and config.topology is not None
    pair = Pair(config)
    assert pair.regions == ("primary", "secondary")
    assert pair.flow_from("secondary").target == "primary"
    assert pair.copy_name("primary", "orders") == "primary.orders"
    assert pair.copy_origin("primary", "secondary.orders") == "orders"
    assert pair.is_local("primary", "orders") and not pair.is_local("primary", "secondary.orders")
    assert pair.owns_group("primary", "app-1") and not pair.owns_group("primary", "other")
    assert pair.owns_group("secondary", "other")  # no filter: every group
    # Each flow as a one-way config: what translation, guard and the markers work on.
    flow = config.for_flow(pair.flow_from("primary"))
    assert flow.topology is None and flow.require_replication().target == "secondary"
    # `config show` prints what drctl reads back.
    assert parse_config(config_as_data(config)).topology == config.topology


@pytest.mark.parametrize("change, key", [
    (lambda raw: raw["topology"]["flows"].pop(), "topology.flows"),
    (lambda raw: raw["topology"]["flows"][1].update(target="secondary", source="primary"),
     "topology.flows"),
    (lambda raw: raw["topology"]["flows"][0].update(kind="replicator"),
     "topology.flows[0].kind"),
    (lambda raw: raw["topology"].update(regions={"tertiary": {}}), "topology.regions.tertiary"),
    (lambda raw: raw.update(replication=_flow("primary", "secondary")), "replication"),
    (lambda raw: raw["topology"].update(kind="star"), "topology.kind"),
])
def test_topology_problems_name_the_key(change: Any, key: str) -> None:
    raw = _raw()
    change(raw)
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    assert any(p.key == key for p in (exc.value.problems or (exc.value,))), str(exc.value)


def test_one_flow_commands_refuse_a_topology_naming_it() -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(_raw()).require_replication()
    assert exc.value.key == "topology" and "--region" in (exc.value.hint or "")


def test_names_kept_both_ways_is_the_loop() -> None:
    loop = Pair(parse_config(_raw("{topic}", "{topic}"))).naming_problem()
    assert loop is not None and "loop" in loop and "primary -> secondary" in loop
    one = Pair(parse_config(_raw(None, "{topic}"))).naming_problem()
    assert one is not None and "topology.flows[1]" in one and "keeps topic names" in one
    assert Pair(parse_config(_raw())).naming_problem() is None


def test_config_check_refuses_the_loop_exit_2(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _raw("{topic}", "{topic}"))
    assert main(["--config", str(path), "config", "check", "--deadline", "1"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "topology.flows: topic names are kept both ways" in err and "a loop" in err


def test_failover_refuses_the_loop_exit_3_before_asking_a_cluster(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _raw("{topic}", "{topic}"))
    assert main(["--config", str(path), "failover", "--region", "primary", "--yes"]) == 3
    err = " ".join(capsys.readouterr().err.split())
    assert "Refused: topic names are kept both ways" in err and "127.0.0.1:9" not in err
    assert not (tmp_path / "state" / "markers").exists()  # nothing recorded


def test_failover_of_a_pair_needs_a_region_and_a_flow_takes_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _raw())
    assert main(["--config", str(path), "failover", "--yes"]) == 2
    assert "--region primary or --region secondary" in capsys.readouterr().err
    assert main(["--config", str(path), "failover", "--region", "tertiary", "--yes"]) == 2
    one_way = tmp_path / "one-way.yaml"
    one_way.write_text("clusters:\n  a: {bootstrap.servers: '127.0.0.1:9'}\n"
                       "  b: {bootstrap.servers: '127.0.0.1:9'}\n"
                       "replication: {kind: mirrormaker2, source: a, target: b}\n")
    assert main(["--config", str(one_way), "failover", "--region", "a", "--yes"]) == 2
    assert "active-active topology" in capsys.readouterr().err


def test_region_groups_regex_keeps_the_region_filter_and_the_option() -> None:
    import re

    pair = Pair(parse_config(_raw(regions={"primary": {"groups": {
        "include": ["app-.*", "agg"], "exclude": ["app-tmp"]}}})))
    regex = re.compile(groups_regex(pair, "primary", "app-.*|agg|x"))
    assert [g for g in ("app-1", "agg", "app-tmp", "x", "other") if regex.fullmatch(g)] == \
        ["app-1", "agg"]
    assert re.compile(groups_regex(pair, "secondary")).fullmatch("anything")


def test_aggregate_regex_is_anchored_to_the_topic_and_its_copy() -> None:
    import re

    pair = Pair(parse_config(_raw()))
    regex = pair.aggregate_regex("primary", ["orders"])
    assert regex == r"^(secondary\.)?orders$"
    assert [t for t in ("orders", "secondary.orders", "preorders", "orders-x")
            if re.search(regex, t)] == ["orders", "secondary.orders"]
    assert pair.aggregate_regex("secondary", ["a", "b"]) == r"^(primary\.)?(a|b)$"


def test_checkpoints_compared_with_the_exact_positions() -> None:
    truth = {("g", "primary.orders", 0): 100, ("g", "primary.orders", 1): 50,
             ("g", "orders", 0): 70}
    cps = {"g": {"primary.orders": {"0": 90, "1": 55}, "orders": {"0": None}}}
    found = compare(truth, cps, {("orders", 0): (10, 120)})
    row = found["groups"]["g"]
    assert (row["redelivered"], row["skipped"]) == (10, 5)
    assert row["no_checkpoint"] == ["orders[0]"]
    assert (row["earliest_redelivers"], row["latest_skips"]) == (60, 50)


def test_lab_config_of_an_active_active_lab_is_a_pair(tmp_path: Path) -> None:
    from drctl.lab.lab import ACTIVE_ACTIVE, Lab, LabPorts, LabState

    lab = Lab(tmp_path)
    state = LabState(LabPorts(), "4.3.1", str(tmp_path), "maven", False,
                     topology=ACTIVE_ACTIVE)
    config = load_config(lab.write_config(state))
    pair = Pair(config)
    assert pair.naming_problem() is None
    assert [f.connect.source_connector for f in config.topology.flows] == \
        ["mm2-primary-secondary-source", "mm2-secondary-primary-source"]


def test_aggregate_subscriptions_that_miss_a_topic_or_over_match() -> None:
    from drctl.ops.active_active.subscriptions import read_findings

    pair = Pair(parse_config(_raw()))
    commits = {"agg": {("orders", 0): 1, ("secondary.orders", 0): 1},
               "half": {("secondary.orders", 0): 1},
               "wide": {("orders", 0): 1, ("secondary.orders", 0): 1, ("preorders", 0): 1,
                        ("secondary.preorders", 0): 1},
               "local": {("orders", 0): 1}}
    found = {f.object: f for f in read_findings(
        pair, "primary", commits, {"orders", "secondary.orders", "preorders",
                                   "secondary.preorders"})}
    assert set(found) == {"group half on primary", "group wide on primary"}
    half = found["group half on primary"]
    assert "but not orders" in half.difference
    assert half.fix == r"subscribe with ^(secondary\.)?orders$"
    wide = found["group wide on primary"]
    assert "preorders, secondary.preorders beside orders" in wide.difference
    assert r"^(secondary\.)?orders$" in wide.fix
    # A copy that never held a record is not missed (no commit can show it was read).
    assert not read_findings(pair, "primary", {"half": {("secondary.orders", 0): 1}},
                             {"secondary.orders"})


def test_a_retry_topic_beside_its_topic_is_read_on_purpose_not_over_matched() -> None:
    """Issue 58, finding 7: `orders.retry` contains `orders` but is a topic of its own (a
    substring test called it an over-match, exit 3, and its regex dropped the retry topic)."""
    import re

    from drctl.ops.active_active.subscriptions import read_findings

    pair = Pair(parse_config(_raw()))
    read = {"orders", "secondary.orders", "orders.retry", "secondary.orders.retry",
            "orders-dlq", "secondary.orders-dlq"}
    assert not read_findings(pair, "primary", {"agg": {(t, 0): 1 for t in read}}, read)
    # Its retry copy missed: the one finding's regex keeps every topic the group reads.
    half = read - {"secondary.orders.retry"}
    (found,) = read_findings(pair, "primary", {"agg": {(t, 0): 1 for t in half}}, read)
    assert "but not secondary.orders.retry" in found.difference
    regex = re.compile(found.fix.removeprefix("subscribe with "))
    assert all(regex.search(t) for t in read)
    assert not regex.search("preorders")
    # A prefix glued on is still an over-match, beside a retry topic too.
    wide = read | {"preorders", "secondary.preorders"}
    (found,) = read_findings(pair, "primary", {"wide": {(t, 0): 1 for t in wide}}, wide)
    assert "preorders, secondary.preorders beside orders, orders-dlq, orders.retry" in \
        found.difference
    assert r"^(secondary\.)?(orders|orders\-dlq|orders\.retry)$" in found.fix


def test_status_of_a_pair_reads_both_flows_and_where_applications_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tests.json_schemas import validate_output

    path = _write(tmp_path, _raw())
    assert main(["--config", str(path), "-o", "json", "status", "--deadline", "1"]) == 4
    document = json.loads(capsys.readouterr().out)
    validate_output(["status"], document)
    assert document["topology"] == "active-active"
    assert [(f["source"], f["target"]) for f in document["flows"]] == \
        [("primary", "secondary"), ("secondary", "primary")]
    # Each region's failover is recorded on the other: with neither answering, unknown.
    assert {r: w["applications_on"] for r, w in document["regions"].items()} == \
        {"primary": "unknown", "secondary": "unknown"}
    assert "did not answer" in document["regions"]["primary"]["why"]


def test_copies_are_named_by_the_other_flows_rename_whatever_the_separator() -> None:
    """Issue 58, finding 2: MirrorMaker 2 with replication.policy.separator '_' (config init
    writes rename '<alias>_{topic}') and aliases that are not drctl's cluster names: a copy
    on a region is named by the flow that writes it — never '<target alias>.'."""
    from drctl.translate.engine import _topic_mapper

    config = parse_config(_raw("dc1_{topic}", "dc2_{topic}"))
    pair = Pair(config)
    out_of_primary = pair.flow_from("primary")
    # The secondary's orders is copied to the primary as dc2_orders: a copy, not a topic of
    # the primary's producers, and the original of dc2_orders is orders on the secondary.
    assert pair.copy_origin("primary", "dc2_orders") == "orders"
    assert out_of_primary.reverse_copy_origin("dc2_orders") == "orders"
    assert out_of_primary.reverse_copy_origin("secondary.orders") is None
    assert out_of_primary.reverse_topic("orders") == "dc2_orders"
    assert not out_of_primary.replicates("dc2_orders")
    # A flow whose topic filter takes only its local names (config init writes MirrorMaker
    # 2's `orders.*`) still maps the copy its groups read onto the original.
    raw = _raw("dc1_{topic}", "dc2_{topic}")
    raw["topology"]["flows"][0]["topics"] = {"include": ["orders.*"]}
    flow = parse_config(raw)
    to_target = _topic_mapper(flow.for_flow(Pair(flow).flow_from("primary")), "primary",
                              "secondary")
    assert to_target("dc2_orders") == "orders"
    assert to_target("orders") == "dc1_orders"
    assert to_target("payments") is None  # not the flow's, not a copy
    # One flow: drctl's own reverse flow names its copies <target alias>.<topic>.
    one_way = parse_config({"clusters": {"a": {"bootstrap.servers": "x:1"},
                                         "b": {"bootstrap.servers": "x:2"}},
                            "replication": {"kind": "mirrormaker2", "source": "a",
                                            "target": "b", "rename": "a.{topic}",
                                            "source_alias": "a", "target_alias": "b"}})
    rep = one_way.require_replication()
    assert rep.reverse_topic("orders") == "b.orders"
    assert rep.reverse_copy_origin("b.orders") == "orders"


def test_config_check_names_a_rename_the_connectors_do_not_write(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 58, finding 2: the config's rename against the connectors' own alias and
    separator — copies named otherwise do not exist."""
    from drctl.replication import connect as connect_module

    class Connect:
        def config(self, name: str) -> dict[str, str]:
            source, target = name.split("-")[1:3]
            return {"connector.class":
                    "org.apache.kafka.connect.mirror.MirrorSourceConnector",
                    "source.cluster.alias": source, "target.cluster.alias": target,
                    "replication.policy.separator": "_"}

    monkeypatch.setattr(connect_module, "connect_client", lambda flow: Connect())
    raw = _raw()
    for flow in raw["topology"]["flows"]:
        flow["connect"] = {"url": "http://127.0.0.1:9",
                           "source_connector": f"mm2-{flow['source']}-{flow['target']}-source"}
    problem = Pair(parse_config(raw)).live_naming_problem()
    assert problem is not None and "rename: primary.{topic}" in problem \
        and "'primary_orders'" in problem and "set the flow's rename to primary_{topic}" \
        in problem, problem
    for flow in raw["topology"]["flows"]:
        flow["rename"] = f"{flow['source']}_{{topic}}"
    assert Pair(parse_config(raw)).live_naming_problem() is None


def _position(group: str, topic: str, target: str, offset: int | None,
              confidence: str = "snapshot") -> Any:
    from drctl.translate.model import PartitionResult

    return PartitionResult(group, topic, 0, target, 5, "snapshot", offset, confidence)


def _report(*groups: tuple[str, list[Any]]) -> Any:
    from drctl.translate.model import GroupResult, TranslationReport

    report = TranslationReport("primary", "secondary", "auto", False, False)
    report.groups = [GroupResult(name, partitions=list(ps)) for name, ps in groups]
    return report


def test_local_only_is_what_the_group_read_never_what_the_translation_lacks() -> None:
    """Issue 58, finding 1: with the primary down, an aggregate group whose position on the
    copy it read (secondary.orders on primary) nobody kept — MirrorMaker 2 never checkpoints
    a copy back — was called local-only and committed at the end of orders on the secondary:
    every record of orders it had not read there skipped, exit 0. What it read decides; one
    nothing tells apart is left behind too."""
    from drctl.ops.active_active.failover import FAILOVER_POINT, _place_local_only
    from drctl.state import FailoverMarker

    pair = Pair(parse_config(_raw()))
    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", False)
    marker.failover_topics_end = {"orders": {0: 70}}
    report = _report(
        ("agg-unkept", [_position("agg-unkept", "orders", "primary.orders", 40)]),
        ("agg", [_position("agg", "orders", "primary.orders", 40),
                 _position("agg", "secondary.orders", "orders", 12)]),
        ("local", [_position("local", "orders", "primary.orders", 40)]),
        ("unknown", [_position("unknown", "orders", "primary.orders", 40)]))
    reads = {"agg-unkept": {"orders", "secondary.orders"}, "agg": {"orders", "secondary.orders"},
             "local": {"orders"}, "unknown": None}
    local = _place_local_only(pair, "primary", report, marker, reads)
    by = {g.group: g for g in report.groups}
    assert local == {"local": ["orders"]}
    assert [(p.target_topic, p.target_offset, p.confidence) for p in by["local"].partitions
            if p.confidence == FAILOVER_POINT] == [("orders", 70, FAILOVER_POINT)]
    # What it reads there is new to it: a bound stated (0), so a drill's ledger judges the
    # group's re-deliveries (with none stated it counted them unjudged).
    assert {p.max_redelivered for p in by["local"].partitions
            if p.confidence == FAILOVER_POINT} == {0}
    skipped = by["agg-unkept"].skipped or ""
    assert "read secondary.orders on primary" in skipped and "KAFKA-12635" in skipped
    assert all(p.confidence != FAILOVER_POINT for p in by["agg-unkept"].partitions)
    assert by["agg"].skipped is None and len(by["agg"].partitions) == 2
    assert "nothing tells what it read there" in (by["unknown"].skipped or "")


def _refusing_ctx(monkeypatch: pytest.MonkeyPatch, commits: dict[str, dict[Any, int]],
                  checkpoints: dict[Any, int]) -> Any:
    from types import SimpleNamespace

    from drctl.ops.active_active import failover

    config = parse_config(_raw())
    rep = Pair(config).flow_from("primary")
    monkeypatch.setattr(failover, "committed_offsets", lambda clients, groups: commits)
    monkeypatch.setattr(failover, "read_checkpoints", lambda clients, topic: {
        key: SimpleNamespace(downstream_offset=o) for key, o in checkpoints.items()})
    kind = SimpleNamespace(checkpoints_topic=lambda rep: "primary.checkpoints.internal")
    return SimpleNamespace(rep=rep, target=object(), require_kind=lambda: kind,
                           notify=lambda _: None)


def test_a_same_id_group_of_the_surviving_region_reading_only_copies_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 58, finding 3: a group of the secondary with a primary group's id that reads
    only primary.orders there was taken for MirrorMaker 2's group-offset sync; the rewind
    rule then made one of the two applications skip, exit 0. MirrorMaker 2's sync commits at
    its checkpoint's downstream offset; any other commit on a copy is the other region's
    group's."""
    from drctl.ops.active_active.failover import _refuse_groups_of_target
    from drctl.state import FailoverMarker

    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", False)
    report = _report(("theirs", [_position("theirs", "orders", "primary.orders", 40)]),
                     ("synced", [_position("synced", "orders", "primary.orders", 40)]))
    ctx = _refusing_ctx(monkeypatch, {"theirs": {("primary.orders", 0): 33},
                                      "synced": {("primary.orders", 0): 38}},
                        {("theirs", "primary.orders", 0): 38,
                         ("synced", "primary.orders", 0): 38})
    refused = _refuse_groups_of_target(ctx, report, marker)
    assert set(refused) == {"theirs"} and "primary.orders[0]" in refused["theirs"]


def test_a_run_again_knows_the_commits_its_plan_recorded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 58, finding 4: positions committed, then a broker drop (or Ctrl-C, or kill)
    before the marker recorded them: the run again refused every group of the region as "a
    group of secondary with the same id?", exit 3, and failback never moved it back. The
    plan is recorded before anything is committed."""
    from drctl.ops.active_active.failover import PLAN_STEP, _planned, _refuse_groups_of_target
    from drctl.state import FailoverMarker

    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", False)
    report = _report(("app", [_position("app", "orders", "primary.orders", 40),
                              _position("app", "secondary.orders", "orders", 12)]))
    marker.record(PLAN_STEP, {"positions": _planned(report)})
    ctx = _refusing_ctx(monkeypatch, {"app": {("primary.orders", 0): 40, ("orders", 0): 12}},
                        {})
    assert _refuse_groups_of_target(ctx, report, marker) == {}
    marker.steps.pop(PLAN_STEP)
    assert set(_refuse_groups_of_target(ctx, report, marker)) == {"app"}


@pytest.mark.parametrize("phase, next_command", [
    ("failed-over", "drctl failback --region primary"),
    ("failing-over", "drctl failover --region primary")])
def test_status_during_a_region_incident_with_the_region_down(
        monkeypatch: pytest.MonkeyPatch, phase: str, next_command: str) -> None:
    """Issue 58, findings 8 and 11: the primary down and failed over. Its incident lives on
    the secondary: known. The flow into the primary cannot be read — yet the secondary's
    applications run at home (the regions cannot run on each other): never "unknown", never
    exit 4 for a known incident. One next command, by the incident's phase: a failover not
    finished is run again (never `failback --region` before it is; never the one-way
    `failback --incident`)."""
    from drctl.ops.active_active import status
    from drctl.ops.active_active.failover import REGION_STEP

    clusters = {"primary": {"reachable": False}, "secondary": {"reachable": True}}
    incident = {"incident": "fo-1", "source": "primary", "target": "secondary",
                "phase": phase, "replication_stop": "stopped", "steps": [REGION_STEP],
                "next_command": "drctl failback --incident fo-1"}

    def reading(ctx: Any, deadline_s: float) -> dict[str, Any]:
        out_of_primary = ctx.rep.source == "primary"
        return {"clusters": clusters, "open_failovers": [dict(incident)] if out_of_primary
                else [], "replication": {
                    "source": ctx.rep.source, "target": ctx.rep.target,
                    "markers_unreadable": None if out_of_primary else
                    "the state topic _drctl_state is on 'primary', which did not answer"}}

    monkeypatch.setattr(status, "collect_status", reading)
    found = status.collect_pair_status(Pair(parse_config(_raw())), lambda _: None, 1.0)
    assert found["regions"]["primary"] == {"applications_on": "secondary", "incident": "fo-1",
                                           "phase": phase, "next_command": next_command}
    assert found["regions"]["secondary"] == {"applications_on": "secondary",
                                             "incident": None}
    assert found["verdict"]["exit_status"] == 3
    assert found["verdict"]["why"] == f"1 open incident(s): fo-1 ({phase}): `{next_command}`."
    assert [m["next_command"] for m in found["open_failovers"]] == [next_command]


def test_failback_of_a_pair_takes_the_incident_it_is_given(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 58, finding 11: `failback --incident` on a pair was ignored without a word."""
    from contextlib import nullcontext

    from drctl.errors import UsageError
    from drctl.ops.active_active import failback
    from drctl.state import FailoverMarker

    mine = FailoverMarker.new("primary", "secondary", "mirrormaker2", False)
    monkeypatch.setattr(failback, "open_region_incident",
                        lambda store, region, to: mine if region == "primary" else None)
    monkeypatch.setattr(Pair, "context", lambda self, region, *a: nullcontext(
        type("Ctx", (), {"store": None})()))
    pair = Pair(parse_config(_raw()))
    assert failback.find_incident(pair, None, print, 1.0, mine.incident) == ("primary", mine)
    with pytest.raises(UsageError) as err:
        failback.find_incident(pair, None, print, 1.0, "fo-elsewhere")
    assert "Incident fo-elsewhere is not an open region failover" in err.value.message
    assert f"{mine.incident} (primary)" in err.value.message


def test_failback_checks_the_regions_consumers_before_it_resumes_a_flow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 58, findings 6 and 10: failback resumed both flows, then found a group of the
    region still consuming on the other region — which had by then read the late copies of
    records it had read at home — and a local-only group told to "read on" with the
    aggregate pattern read them a second time. Nothing resumes until the region's consumers
    are stopped there and its local-only groups have read what its producers wrote; the
    read-on names the local topic alone."""
    from types import SimpleNamespace

    from drctl.errors import CheckFailed
    from drctl.ops.active_active import failback
    from drctl.ops.active_active.failover import REGION_STEP
    from drctl.state import FailoverMarker

    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", False)
    marker.record(REGION_STEP, {"region": "primary", "to": "secondary"})
    marker.record("failover", {"region": "primary"})
    marker.failover_topics_end = {"orders": {0: 10}}
    marker.groups = {"agg": {"applied": True}, "local": {"applied": True,
                                                         "local_only": ["orders"]}}
    resumed: list[str] = []
    monkeypatch.setattr(failback, "describe_with_retry", lambda *a, **k: None)
    monkeypatch.setattr(failback, "read_ends", lambda clients, topics: {"orders": {0: 25}})
    monkeypatch.setattr(failback, "group_states", lambda clients, groups: {
        "agg": SimpleNamespace(active=True, state="STABLE"),
        "local": SimpleNamespace(active=False, state="EMPTY")})
    monkeypatch.setattr(failback, "committed_offsets",
                        lambda clients, groups: {"local": {("orders", 0): 20}})
    monkeypatch.setattr(failback, "_flows_running", lambda *a: resumed.append("flows") or {})
    config = parse_config(_raw())
    rep = Pair(config).flow_from("primary")
    ctx = SimpleNamespace(rep=rep, target=object(), clients=lambda name: object(),
                          notify=lambda _: None, config=config,
                          store=SimpleNamespace(save=lambda m: None))
    with pytest.raises(CheckFailed) as err:
        failback.run_region_failback(Pair(config), ctx, ctx, marker,  # type: ignore[arg-type]
                                     failback.RegionFailbackOptions())
    assert resumed == []
    message = err.value.message
    assert "agg: its consumers are still active on secondary (STABLE): stop them" in message
    assert "local: a local-only group that has not read 5 record(s) of orders" in message
    assert "subscribed to ^(orders)$ alone" in message
    assert "Nothing was resumed" in (err.value.hint or "")


def test_check_names_a_group_whose_copy_position_guard_never_kept() -> None:
    """Issue 58, what to build 1: a failover with the region down leaves such a group behind
    (MirrorMaker 2 never checkpoints a copy back): `check` says so before the outage."""
    from drctl.ops.active_active.subscriptions import unguarded_copy_findings

    pair = Pair(parse_config(_raw()))
    commits = {"agg": {("orders", 0): 5, ("secondary.orders", 0): 3, ("secondary.orders", 1): 2},
               "kept": {("orders", 0): 5, ("secondary.orders", 0): 3},
               "local": {("orders", 0): 5}}
    snapshots = {("agg", "secondary.orders", 0), ("kept", "secondary.orders", 0),
                 ("agg", "orders", 0)}
    found = unguarded_copy_findings(pair, "primary", commits, snapshots)
    assert [(f.object, f.difference) for f in found] == [
        ("group agg on primary", "guard has never kept its position on secondary.orders")]
    assert "KAFKA-12635" in found[0].risk


def test_mirrormakers_internal_topics_carry_its_separator() -> None:
    """Issue 58, finding 2: with replication.policy.separator '_' MirrorMaker 2 names its
    checkpoints and offset syncs with it too (DefaultReplicationPolicy, since Kafka 3.1):
    drctl looked for primary.checkpoints.internal and found no checkpoint."""
    from drctl.replication.mirrormaker2 import MirrorMaker2, mm2_flows, offset_syncs_topic

    flow = Pair(parse_config(_raw("primary_{topic}", "secondary_{topic}"))).flow_from("primary")
    assert MirrorMaker2().checkpoints_topic(flow) == "primary_checkpoints_internal"
    assert offset_syncs_topic(flow) == "mm2-offset-syncs_secondary_internal"
    assert MirrorMaker2().checkpoints_topic(Pair(parse_config(_raw())).flow_from("primary")) \
        == "primary.checkpoints.internal"
    # Names kept with a custom separator, or the internal separator turned off: only the
    # connectors say it; config init writes it.
    source = {"connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
              "source.cluster.alias": "a", "target.cluster.alias": "b",
              "replication.policy.class":
                  "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
              "replication.policy.separator": "-"}
    assert mm2_flows({"src": source})[0].internal_separator == "-"
    off = {**source, "replication.policy.class":
           "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
           "replication.policy.internal.topic.separator.enabled": "false"}
    assert mm2_flows({"src": off})[0].internal_separator == "."
    assert mm2_flows({"src": {**off, "replication.policy.internal.topic.separator.enabled":
                              "true"}})[0].internal_separator is None


def test_mirrormakers_own_topics_in_a_region_are_never_local_nor_read() -> None:
    """With separator '_' the flow into a region names its checkpoints and the heartbeats'
    copies there with it: not local topics of the region, not topics a group reads."""
    pair = Pair(parse_config(_raw("primary_{topic}", "secondary_{topic}")))
    assert not pair.is_local("primary", "secondary_checkpoints_internal")
    assert not pair.is_local("primary", "secondary_heartbeats")
    assert pair.is_local("primary", "orders") and pair.is_internal("primary", "heartbeats")
    dotted = Pair(parse_config(_raw()))
    assert not dotted.is_internal("primary", "secondary_heartbeats")  # a topic, with '.'
    assert dotted.is_internal("primary", "secondary.heartbeats")


def test_a_run_again_after_the_groups_were_done_still_names_those_left_behind() -> None:
    """Found by the active-active drill under faults: a failover run again once its groups
    were done (a fault killed it after, a pending stop confirmed) had no translation of its
    own and named no group left behind — exit 0, and a runbook ran the group where it had
    no position. The marker keeps every group's verdict."""
    from drctl.ops.active_active.failover import RegionFailoverResult
    from drctl.state import FailoverMarker

    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", False)
    marker.groups = {"kept": {"applied": True, "skipped": None, "positions": {
                         "primary.orders": {"0": {"offset": 5, "confidence": "snapshot",
                                                  "max_redelivered": 3}}}},
                     "unkept": {"applied": False, "skipped": "it read secondary.orders"}}
    again = RegionFailoverResult("primary", "secondary", marker, False)
    assert again.refused == ["unkept: it read secondary.orders"]
    assert again.exit_status == 3
    summary = again.runbook_summary()
    assert summary["left_behind_groups"] == ["unkept"]
    assert summary["groups_moved"] == ["kept"]
    assert summary["redelivery_bound"] == {"kept": 3}


def test_a_region_down_without_drctls_inventory_of_it_says_what_it_cannot_see(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the region down and guard never run against it, a group MirrorMaker 2 never
    checkpointed is neither moved nor named: the failover says drctl cannot see such groups
    (once guard's inventory exists, the groups it lists are named as left behind instead)."""
    from types import SimpleNamespace

    from drctl.ops.active_active import failover

    config = parse_config(_raw())
    ctx = SimpleNamespace(config=config, target=object())
    kept: dict[str, Any] = {"inventory": None}
    monkeypatch.setattr(failover, "read_snapshot_topic",
                        lambda clients, topic: SimpleNamespace(inventory=kept["inventory"]))
    [line] = failover._unseen_groups(ctx, "primary")  # type: ignore[arg-type]
    assert "no inventory of primary's groups" in line and "drctl guard" in line
    kept["inventory"] = SimpleNamespace(groups={"agg": ["orders"]})
    assert failover._unseen_groups(ctx, "primary") == []  # type: ignore[arg-type]


class _Store:
    """The marker store's look-ups and saves, in a list."""

    def __init__(self, *markers: Any) -> None:
        self.markers, self.saved = list(markers), []  # type: ignore[var-annotated]

    def open_markers(self, source: str | None = None, target: str | None = None) -> list[Any]:
        return [m for m in self.markers if m.status == "open"
                and source in (None, m.source) and target in (None, m.target)]

    def save(self, marker: Any) -> None:
        self.saved.append(marker.incident)


def test_a_region_failover_claims_under_both_flows_locks_in_one_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 58, finding 5: two operators (or both regions in a partition) failing over at
    once. Both flows' locks are taken, in the regions' order whichever region fails over (no
    two failovers wait on each other); with the region down only the flow out of it (its
    lock lives on the survivor)."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from drctl.ops.active_active import failover

    pair = Pair(parse_config(_raw()))
    taken: list[str] = []

    @contextmanager
    def locked(ctx: Any, what: str) -> Iterator[None]:
        taken.append(ctx.name)
        yield

    @contextmanager
    def context(region: str, notify: Any = None, deadline_s: Any = None) -> Iterator[Any]:
        yield SimpleNamespace(name=f"flow out of {region}")

    monkeypatch.setattr(failover, "flow_locked", locked)
    monkeypatch.setattr(pair, "context", context)
    for region in ("secondary", "primary"):
        ctx = SimpleNamespace(name=f"flow out of {region}", notify=None, deadline_s=1.0)
        taken.clear()
        with failover._pair_locked(pair, ctx, region, True, "failover"):  # type: ignore[arg-type]
            pass
        assert taken == ["flow out of primary", "flow out of secondary"]
        taken.clear()
        with failover._pair_locked(pair, ctx, region, False, "failover"):  # type: ignore[arg-type]
            pass
        assert taken == [f"flow out of {region}"]


def test_a_region_failover_claims_refuses_an_incident_opened_meanwhile_and_closes_the_stuck(
        ) -> None:
    """Under the locks the incidents are read again: another operator's failover of the
    region opened meanwhile is refused, named (continue it with --incident); one superseded by
    --new-incident (a failback that could not finish) is closed, naming the new one."""
    from types import SimpleNamespace

    from drctl.ops.active_active.failover import REGION_STEP, _claim
    from drctl.state import FailoverMarker

    pair = Pair(parse_config(_raw()))
    mine = FailoverMarker.new("primary", "secondary", "mirrormaker2", False)
    theirs = FailoverMarker.new("primary", "secondary", "mirrormaker2", False)
    notes: list[str] = []
    ctx = SimpleNamespace(store=_Store(mine, theirs), notify=notes.append)
    with pytest.raises(UsageError, match=f"Incident {theirs.incident} of primary was opened "
                                         "meanwhile") as info:
        _claim(pair, ctx, "primary", mine, [], {"orders": "primary.orders"},  # type: ignore
               region_up=False)
    assert f"--incident {theirs.incident}" in (info.value.hint or "")
    assert REGION_STEP not in mine.steps and ctx.store.saved == []
    # The stuck one superseded: closed, the new one recorded as the region's failover.
    _claim(pair, ctx, "primary", mine, [theirs], {"orders": "primary.orders"},  # type: ignore
           region_up=False)
    assert theirs.status == "closed" and theirs.steps["superseded"].result["by"] == mine.incident
    assert mine.steps[REGION_STEP].result == {"topology": "active-active", "region": "primary",
                                              "to": "secondary"}
    assert ctx.store.saved == [theirs.incident, mine.incident]
    assert any("superseded" in n for n in notes)


def test_a_region_failback_times_its_phases_across_runs_for_the_scorecard(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 58: the campaign's RTO by phase had no region operation (a region's failover and
    failback carried no scorecard). A first failback run that waits for the region's groups
    is kept in the marker's timings (its time is part of the return); the run that finishes
    states its own phases and the incident's elapsed time over both runs, as the campaign
    reads it (runbook/campaign.py `_operation`)."""
    from types import SimpleNamespace

    from drctl.errors import CheckFailed
    from drctl.ops.active_active import failback
    from drctl.ops.active_active.failover import REGION_STEP
    from drctl.runbook.campaign import _operation
    from drctl.state import FailoverMarker

    marker = FailoverMarker.new("primary", "secondary", "mirrormaker2", False)
    marker.record(REGION_STEP, {"region": "primary", "to": "secondary"})
    marker.record("failover", {"region": "primary"})
    marker.failover_topics_end = {"orders": {0: 10}}
    marker.groups = {"agg": {"applied": True}}
    saved: list[int] = []
    active = {"agg": True}
    monkeypatch.setattr(failback, "describe_with_retry", lambda *a, **k: None)
    monkeypatch.setattr(failback, "read_ends", lambda clients, topics: {"orders": {0: 10}})
    monkeypatch.setattr(failback, "group_states", lambda clients, groups: {
        g: SimpleNamespace(active=active[g], state="STABLE" if active[g] else "EMPTY")
        for g in groups})
    monkeypatch.setattr(failback, "committed_offsets", lambda clients, groups: {})
    monkeypatch.setattr(failback, "_flows_running", lambda *a: {"flow": {"state": "copying"}})
    monkeypatch.setattr(failback, "audit_failover",
                        lambda *a: SimpleNamespace(as_dict=lambda: {"totals": {"skipped": 0}}))
    monkeypatch.setattr(failback, "wait_quiet_and_caught_up", lambda *a, **k: None)
    monkeypatch.setattr(failback, "late_arrivals", lambda ctx, m: {"total": 0})

    def groups_back(ctx: Any, back: Any, m: Any, cut: Any, opts: Any, result: Any) -> None:
        result.moved = ["agg"]

    monkeypatch.setattr(failback, "_groups_back", groups_back)
    config = parse_config(_raw())
    rep = Pair(config).flow_from("primary")
    ctx = SimpleNamespace(rep=rep, target=object(), clients=lambda name: object(),
                          notify=lambda _: None, config=config,
                          store=SimpleNamespace(save=lambda m: saved.append(len(m.timings))))
    with pytest.raises(CheckFailed):
        failback.run_region_failback(Pair(config), ctx, ctx, marker,  # type: ignore[arg-type]
                                     failback.RegionFailbackOptions())
    (first,) = marker.timings
    assert first["command"] == "failback" and first["ended"] and not first["finished"]
    assert [p["phase"] for p in first["phases"]] == ["preflight"] and saved, saved

    active["agg"] = False  # the operator stopped the group on secondary
    result = failback.run_region_failback(Pair(config), ctx, ctx,  # type: ignore[arg-type]
                                          marker, failback.RegionFailbackOptions())
    assert result.done and len(marker.timings) == 2
    card = result.scorecard()
    assert card["operation"] == "failback" and card["incident"] == marker.incident
    timing = card["timing"]
    assert timing["finished"] and timing["runs"] == 2, timing
    phases = [p["phase"] for p in timing["this_run"]["phases"]]
    assert phases == ["preflight", "flows", "audit", "late-arrivals", "groups"], phases
    assert timing["elapsed_s"] >= timing["this_run"]["total_s"]
    operation = _operation("failback", result.runbook_summary()["scorecard"])
    assert set(operation["phases_s"]) == set(phases) and operation["runs"] == 2, operation
    assert result.as_dict()["scorecard"] == card


def test_failback_restarts_a_task_that_fails_again_while_its_region_comes_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A source task restarted while the returning region's broker was still starting failed
    again (its first metadata timed out) and failback waited its whole --timeout on it:
    "the flow does not run". A connector or task found FAILED during the wait is restarted
    again (at most every _RESTART_EVERY_S)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from drctl.config import ConnectSettings
    from drctl.ops.active_active import failback

    class Worker:
        def __init__(self) -> None:
            self.restarts = 0

        def connector_state(self, name: str) -> tuple[str, list[str]]:
            # The first restart does not hold: the task fails again; the second does.
            return "RUNNING", ["RUNNING" if self.restarts >= 2 else "FAILED"]

        def restart_failed(self, name: str) -> None:
            self.restarts += 1

        def resume(self, name: str) -> None:
            pass  # it runs: a no-op

    worker = Worker()
    monkeypatch.setattr(failback, "connect_client", lambda rep, *a, **k: worker)
    monkeypatch.setattr(failback, "_RESTART_EVERY_S", 0.0, raising=False)
    config = parse_config(_raw())
    pair = Pair(config)
    flows = [SimpleNamespace(rep=replace(pair.flow_from(r), connect=ConnectSettings(
        url="http://127.0.0.1:1", source_connector=f"{r}-source")), notify=lambda _: None)
        for r in ("primary", "secondary")]
    out = failback._flows_running(flows[0], flows[1],  # type: ignore[arg-type]
                                  failback.RegionFailbackOptions(timeout_s=5))
    assert worker.restarts == 2, worker.restarts
    touched = out["primary -> secondary"]["touched"]
    assert touched == ["primary-source: restarted", "primary-source: restarted again"], out


def test_failback_resumes_a_connector_that_failed_while_stopped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """MirrorMaker 2's checkpoint connector failed while the failover had it stopped (its
    source region down): Connect reports FAILED over a target state of STOPPED, which its
    REST API does not show. Restarted alone, it came back STOPPED and failback waited its
    --timeout on it ("the flow does not run ... checkpoint ('STOPPED', [])"). It is resumed
    as well as restarted."""

    class Worker:
        """Connect as it behaves: a restart brings a connector back to its target state."""

        def __init__(self) -> None:
            self.target = {"primary-checkpoint": "STOPPED", "secondary-checkpoint": "STARTED"}
            self.status = {"primary-checkpoint": "FAILED", "secondary-checkpoint": "RUNNING"}

        def connector_state(self, name: str) -> tuple[str, list[str]]:
            state = self.status[name]
            return state, ["RUNNING"] if state == "RUNNING" else []

        def resume(self, name: str) -> None:
            self.target[name] = "STARTED"
            if self.status[name] in ("STOPPED", "PAUSED"):
                self.status[name] = "RUNNING"

        def restart_failed(self, name: str) -> None:
            if self.status[name] == "FAILED":
                self.status[name] = "RUNNING" if self.target[name] == "STARTED" else "STOPPED"

    worker = Worker()
    out = _checkpoint_flows_running(monkeypatch, worker)
    assert worker.status == {"primary-checkpoint": "RUNNING",
                             "secondary-checkpoint": "RUNNING"}, worker.status
    assert out["primary -> secondary"]["touched"] == [
        "primary-checkpoint: resumed", "primary-checkpoint: restarted"], out
    assert out["secondary -> primary"]["touched"] == [], out


def test_failback_resumes_a_connector_whose_status_lags_its_stop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault round SIGTERMed Connect while the failover stopped the region's flow: the
    worker came back with the checkpoint connector's target state STOPPED and its status
    still RUNNING, with no task. Failback resumed only what its status showed stopped, said
    the flow copied, and the pair never checkpointed again (the next round's failover found
    no group). Every connector of both flows is resumed; only those shown not running are
    said."""

    class Worker:
        def __init__(self) -> None:
            self.target = {"primary-checkpoint": "STOPPED", "secondary-checkpoint": "STARTED"}

        def connector_state(self, name: str) -> tuple[str, list[str]]:
            return "RUNNING", []  # what REST showed for both

        def resume(self, name: str) -> None:
            self.target[name] = "STARTED"

        def restart_failed(self, name: str) -> None:
            raise AssertionError("nothing failed")

    worker = Worker()
    out = _checkpoint_flows_running(monkeypatch, worker)
    assert worker.target == {"primary-checkpoint": "STARTED",
                             "secondary-checkpoint": "STARTED"}, worker.target
    assert out["primary -> secondary"]["touched"] == [], out


def _checkpoint_flows_running(monkeypatch: pytest.MonkeyPatch, worker: Any) -> dict[str, Any]:
    """failback's `_flows_running` on the pair's two flows, each with a checkpoint connector
    (`<region>-checkpoint`) on the fake Connect `worker`."""
    from dataclasses import replace
    from types import SimpleNamespace

    from drctl.config import ConnectSettings
    from drctl.ops.active_active import failback

    monkeypatch.setattr(failback, "connect_client", lambda rep, *a, **k: worker)
    pair = Pair(parse_config(_raw()))
    flows = [SimpleNamespace(rep=replace(pair.flow_from(r), connect=ConnectSettings(
        url="http://127.0.0.1:1", checkpoint_connector=f"{r}-checkpoint")),
        notify=lambda _: None) for r in ("primary", "secondary")]
    return failback._flows_running(flows[0], flows[1],  # type: ignore[arg-type]
                                   failback.RegionFailbackOptions(timeout_s=3))
