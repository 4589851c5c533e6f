"""Replication kinds: the registry, what each kind decides, and that nothing outside
drctl/replication/ branches on a kind name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import drctl
from drctl.config import parse_config
from drctl.errors import ConfigError
from drctl.gap.plan import DIFF, IDENTITY
from drctl.gap.planner import gap_kind
from drctl.replication.base import ReplicationKind, kind_for, kind_named
from drctl.replication_registry import KIND_NAMES


def test_registry_lists_exactly_the_three_kinds() -> None:
    assert KIND_NAMES == ("replicator", "mirrormaker2", "identity")
    for name in KIND_NAMES:
        assert isinstance(kind_named(name), ReplicationKind)


def test_kind_for_settings_is_one_object_per_kind() -> None:
    config = parse_config({"clusters": {"a": {"bootstrap.servers": "x"},
                                        "b": {"bootstrap.servers": "y"}},
                           "replication": {"kind": "mirrormaker2", "source": "a",
                                           "target": "b"}})
    assert kind_for(config.require_replication()) is kind_named("mirrormaker2")


def test_unknown_kind_message_is_unchanged() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"clusters": {"a": {"bootstrap.servers": "x"},
                                   "b": {"bootstrap.servers": "y"}},
                      "replication": {"kind": "mirormaker2", "source": "a", "target": "b"}})
    assert info.value.message == ("replication.kind: must be one of replicator, mirrormaker2, "
                                  "identity, got 'mirormaker2'")
    assert info.value.hint == "Did you mean 'mirrormaker2'?"


@pytest.mark.parametrize("kind,renamed_ok", [("replicator", True), ("mirrormaker2", True),
                                             ("identity", False)])
def test_rename_rule_per_kind(kind: str, renamed_ok: bool) -> None:
    raw = {"clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
           "replication": {"kind": kind, "source": "a", "target": "b",
                           "rename": "a.{topic}"}}
    if renamed_ok:
        assert parse_config(raw).require_replication().rename == "a.{topic}"
    else:
        with pytest.raises(ConfigError) as info:
            parse_config(raw)
        assert info.value.message == "replication.rename: identity mirrors keep topic names"


# (source reachable, forward flow) -> the method `auto` picks (None: the source is needed)
@pytest.mark.parametrize("kind,expected", [
    ("replicator", {(True, True): "exact", (True, False): "exact",
                    (False, True): None, (False, False): None}),
    ("mirrormaker2", {(True, True): "exact", (True, False): "exact",
                      (False, True): "checkpoint", (False, False): None}),
    ("identity", {(True, True): "identity", (True, False): "identity",
                  (False, True): "identity", (False, False): "identity"}),
])
def test_auto_translation_method(kind: str, expected: dict) -> None:
    k = kind_named(kind)
    for (source_up, forward), method in expected.items():
        assert k.auto_translate_method(source_up=source_up, forward=forward) == method


@pytest.mark.parametrize("kind,gap,checkpoints,provenance", [
    ("replicator", DIFF, None, "__replicator_id"),
    ("mirrormaker2", DIFF, "a.checkpoints.internal", None),
    ("identity", IDENTITY, None, None),
])
def test_gap_kind_checkpoints_and_provenance(kind: str, gap: str, checkpoints: str | None,
                                             provenance: str | None) -> None:
    config = parse_config({"clusters": {"a": {"bootstrap.servers": "x"},
                                        "b": {"bootstrap.servers": "y"}},
                           "replication": {"kind": kind, "source": "a", "target": "b"}})
    k = kind_named(kind)
    assert gap_kind(k) == gap
    assert k.checkpoints_topic(config.require_replication()) == checkpoints
    assert k.provenance_header == provenance


def test_only_mirrormaker2_reverse_flow_is_started_and_awaited_by_drctl() -> None:
    assert [n for n in KIND_NAMES if kind_named(n).reverse_started_by_drctl] == ["mirrormaker2"]


_NAMES = "|".join(re.escape(n) for n in KIND_NAMES)
_KIND_COMPARISONS = [
    # kind == "identity", kind != 'mirrormaker2', rep.kind in ("replicator", ...)
    re.compile(rf"kind\s*(==|!=|\bin\b|\bnot in\b)\s*[(\[{{]?[^\n]*?[\"']({_NAMES})[\"']"),
    # "identity" == kind
    re.compile(rf"[\"']({_NAMES})[\"']\s*(==|!=)\s*\w*\.?kind\b"),
    re.compile(r"\brep\.kind\s*(==|!=|\bin\b)"),
]


def test_no_kind_name_comparisons_outside_the_replication_package() -> None:
    root = Path(drctl.__file__).parent
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if root / "replication" in path.parents:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if any(rx.search(line) for rx in _KIND_COMPARISONS):
                offenders.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    assert offenders == [], "ask the ReplicationKind object instead:\n" + "\n".join(offenders)


def test_the_comparison_patterns_catch_what_they_should() -> None:
    for line in ['if rep.kind == "mirrormaker2":', "if kind != 'identity':",
                 'if rep.kind in ("replicator", "identity"):', 'if "identity" == rep.kind:',
                 "if rep.kind == name:"]:
        assert any(rx.search(line) for rx in _KIND_COMPARISONS), line
    for line in ['if self.kind == IDENTITY:', 'return {"kind": rep.kind, "start": starts}',
                 'if method == "identity":']:
        assert not any(rx.search(line) for rx in _KIND_COMPARISONS), line


_NEW_KIND = '''"""A kind added for the test: an offset-preserving link driven by its own API."""
from drctl.replication.identity import Identity


class ClusterLink(Identity):
    def component_states(self, rep):
        return {"link": "ACTIVE"}
'''

_PROBE = '''
import os
import drctl
assert drctl.__file__.startswith(os.environ["PYTHONPATH"]), drctl.__file__
from drctl.config import parse_config
from drctl.gap.planner import gap_kind
from drctl.replication.base import kind_for
from drctl.replication_registry import KIND_NAMES
config = parse_config({"clusters": {"a": {"bootstrap.servers": "x"},
                                    "b": {"bootstrap.servers": "y"}},
                       "replication": {"kind": "clusterlink", "source": "a", "target": "b"}})
kind = kind_for(config.require_replication())
print(type(kind).__name__, KIND_NAMES[-1], gap_kind(kind),
      kind.auto_translate_method(source_up=False, forward=True),
      kind.component_states(config.require_replication())["link"])
'''


def test_a_new_kind_is_one_module_and_one_registration_line(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys

    package = Path(drctl.__file__).parent
    copy = tmp_path / "drctl"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "replication" / "clusterlink.py").write_text(_NEW_KIND)  # the one module
    registry = copy / "replication_registry.py"
    text = registry.read_text()
    last = ('    "identity": KindEntry("drctl.replication.identity:Identity", '
            'keeps_topic_names=True),\n')
    assert last in text
    registry.write_text(text.replace(last, last + '    "clusterlink": KindEntry('
                                     '"drctl.replication.clusterlink:ClusterLink", '
                                     'keeps_topic_names=True),\n'))  # the one line
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ClusterLink", "clusterlink", IDENTITY, "identity", "ACTIVE"]


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


def test_mm2_flow_knows_which_topics_it_copies() -> None:
    from drctl.kafka.mm2_connectors import MirrorFlow

    flow = MirrorFlow("primary", "secondary", "a:1", "b:1")
    assert flow.replicates("orders") and flow.replicates("t1-acct")
    for never in ("t1-scope.replica", "__consumer_offsets", "_drctl_state", "connect-offsets",
                  "orders.drctl-quarantine", "mm2-offsets.primary.internal"):
        assert not flow.replicates(never), never
    assert not MirrorFlow("primary", "secondary", "a:1", "b:1", topics="orders").replicates("x")
