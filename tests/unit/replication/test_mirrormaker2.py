"""MirrorMaker 2 as a replication kind (drctl/replication/mirrormaker2.py): the reverse
flow logs in like the forward one; what its settings cost a failover with the source
gone."""

from __future__ import annotations

from drctl.config import parse_config


class _ForwardConnect:
    """Connect's answer for the forward source connector's config (what GET returns)."""

    def __init__(self, config: dict[str, str] | None) -> None:
        self.forward = config

    def config(self, name: str) -> dict[str, str]:
        from drctl.kafka.connect_rest import ConnectorMissing

        if self.forward is None or name != "fwd":
            raise ConnectorMissing(f"no connector {name}", 404)
        return self.forward


def test_reverse_mirrormaker_flow_logs_in_like_the_forward_one() -> None:
    from typing import Any, cast

    from drctl.replication.mirrormaker2 import (
        forward_client_settings,
        reverse_connector_config,
        reverse_flow,
    )

    config = parse_config({
        "clusters": {"dc1": {"bootstrap.servers": "a:1"}, "dc2": {"bootstrap.servers": "b:1"}},
        "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2",
                        "connect": {"url": "http://c:8083", "source_connector": "fwd"}}})
    rep = config.require_replication()
    jaas = "${file:/lab/credentials/mirrormaker.properties:sasl.jaas.config}"
    forward = {"source.cluster.alias": "dc1", "source.cluster.bootstrap.servers": "a:1",
               "source.cluster.security.protocol": "SASL_PLAINTEXT",
               "source.cluster.sasl.jaas.config": jaas,
               "target.cluster.alias": "dc2", "target.cluster.security.protocol": "SSL",
               "tasks.max": "1"}
    source_side, target_side = forward_client_settings(cast(Any, _ForwardConnect(forward)), rep)
    assert source_side == {"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas}
    assert target_side == {"security.protocol": "SSL"}
    flow = reverse_flow(config, ["orders"], source_client=target_side,
                        target_client=source_side)
    cfg = reverse_connector_config(flow, "drctl-reconciled", "fo-1")
    assert cfg["source.cluster.alias"] == "dc2" and cfg["source.cluster.bootstrap.servers"] == "b:1"
    assert cfg["source.cluster.security.protocol"] == "SSL"
    assert cfg["target.cluster.sasl.jaas.config"] == jaas  # a reference, never the password
    assert cfg["producer.override.security.protocol"] == "SASL_PLAINTEXT"
    assert forward_client_settings(cast(Any, _ForwardConnect(None)), rep) == ({}, {})


def test_mirrormaker_settings_say_what_a_source_down_failover_costs() -> None:
    from drctl.replication.mirrormaker2 import checkpoint_costs

    defaults = checkpoint_costs({}, {})
    assert (defaults["checkpoint_interval_s"], defaults["group_refresh_s"],
            defaults["topic_refresh_s"], defaults["offset_lag_max"]) == (60, 600, 600, 100)
    assert "up to 60 s of its reading again" in defaults["lines"][0]
    assert any("younger than that has no checkpoint" in line for line in defaults["lines"])
    lab = checkpoint_costs({"refresh.topics.interval.seconds": "2", "offset.lag.max": "10"},
                           {"emit.checkpoints.interval.seconds": "1", "groups": "orders-.*",
                            "refresh.groups.interval.seconds": "bogus"})
    assert (lab["checkpoint_interval_s"], lab["topic_refresh_s"], lab["offset_lag_max"],
            lab["group_refresh_s"]) == (1, 2, 10, 600)
    assert lab["lines"][-1] == "Only groups matching 'orders-.*' are checkpointed."


def _lint(source: dict[str, str], checkpoint: dict[str, str],
          active: tuple[str, ...] = ()) -> dict[str, str]:
    from drctl.findings import Severity
    from drctl.replication.mirrormaker2 import mm2_settings_findings

    found = mm2_settings_findings(source, checkpoint, {"source": "src", "checkpoint": "cpt"},
                                  list(active))
    return {f.difference: f.severity for f in found if f.severity == Severity.RISK}


def test_settings_that_silently_disable_what_drctl_relies_on_are_risks() -> None:
    safe_source = {"source.consumer.isolation.level": "read_committed"}
    assert _lint(safe_source, {}) == {}
    # MirrorMaker 2's own default copies aborted records as ordinary ones.
    assert list(_lint({}, {})) == ["source consumer isolation.level=read_uncommitted"]
    risks = _lint({**safe_source, "emit.offset-syncs.enabled": "false",
                   "offset-syncs.topic.location": "target"},
                  {"emit.checkpoints.enabled": "false", "sync.group.offsets.enabled": "true"},
                  active=("billing",))
    assert sorted(risks) == sorted([
        "emit.offset-syncs.enabled=false", "emit.checkpoints.enabled=false",
        "offset-syncs.topic.location=source, the source connector writes them on the target",
        "sync.group.offsets.enabled=true with group(s) active on the target: billing"])
    # Group offset sync with nobody active on the target costs nothing to fix.
    assert _lint(safe_source, {"sync.group.offsets.enabled": "true"}) == {}


def test_with_names_kept_no_reverse_flow_starts_while_the_forward_one_copies() -> None:
    import pytest

    from drctl.config import ReplicationSettings
    from drctl.errors import CheckFailed, ExitStatus
    from drctl.replication.base import FlowState
    from drctl.replication.mirrormaker2 import MirrorMaker2

    class Copying(MirrorMaker2):
        def forward_state(self, rep: ReplicationSettings) -> FlowState:
            return FlowState(True, {"mm2-primary-secondary-source": "RUNNING"},
                             copying=("mm2-primary-secondary-source",))

    kept = ReplicationSettings("mirrormaker2", "primary", "secondary")
    with pytest.raises(CheckFailed) as refused:
        Copying()._refuse_cycle(kept, "mm2-secondary-primary-source")
    assert refused.value.exit_status == ExitStatus.CHECK_FAILED
    assert "mm2-primary-secondary-source is RUNNING" in refused.value.message
    assert "mm2-secondary-primary-source would copy the other way" in refused.value.message
    # With prefixed names the replication policy tells copies apart: no cycle to refuse.
    Copying()._refuse_cycle(ReplicationSettings("mirrormaker2", "primary", "secondary",
                                                rename="primary.{topic}"),
                            "mm2-secondary-primary-source")
