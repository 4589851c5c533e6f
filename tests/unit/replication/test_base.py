"""Replication kinds (drctl/replication/base.py): what each kind decides, and that
nothing outside drctl/replication/ branches on a kind name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import drctl
from drctl.config import parse_config
from drctl.gap.plan import DIFF, IDENTITY
from drctl.gap.planner import gap_kind
from drctl.replication.base import kind_for, kind_named
from drctl.replication_registry import KIND_NAMES


def test_kind_for_settings_is_one_object_per_kind() -> None:
    config = parse_config({"clusters": {"a": {"bootstrap.servers": "x"},
                                        "b": {"bootstrap.servers": "y"}},
                           "replication": {"kind": "mirrormaker2", "source": "a",
                                           "target": "b"}})
    assert kind_for(config.require_replication()) is kind_named("mirrormaker2")


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
