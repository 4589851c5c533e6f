"""The active-active topology (drctl/ops/active_active/, `topology:` in drctl/config.py): two
flows one each way, the naming loop refused by `config check` (exit 2) and `failover`
(exit 3) before anything is asked of a cluster, the topics and groups of a region."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.cli.app import main
from drctl.config import config_as_data, load_config, parse_config
from drctl.errors import ConfigError
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
