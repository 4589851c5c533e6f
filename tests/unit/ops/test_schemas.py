"""What failover and failback do with a schema-parity result (drctl/ops/steps/schemas.py): refuse
with every id named and the fix unless --force; a silent registry stops failback, never a
failover."""

from __future__ import annotations

import pytest

from drctl.config import parse_config
from drctl.context import OpsContext
from drctl.errors import CheckFailed, ExitStatus, Unreachable
from drctl.ops.steps.schemas import refuse_unless_forced
from drctl.registry.parity import Issue, IssueKind, Parity

CONFIG = parse_config({"clusters": {"primary": {"bootstrap.servers": "a:1"},
                                    "secondary": {"bootstrap.servers": "b:1"}}})


def context(heard: list[str]) -> OpsContext:
    return OpsContext(CONFIG, notify=heard.append)


def drifted() -> Parity:
    return Parity("mirrored records", "primary", "secondary", ids=[3, 4], issues=[
        Issue(IssueKind.DIFFERENT, 3, "c-value", 1, ("c",), "schema id 3 resolves to a "
              "different schema on secondary's registry"),
        Issue(IssueKind.DIFFERENT, 4, "d-value", 1, ("d",), "schema id 4 resolves to a "
              "different schema on secondary's registry")])


def silent() -> Parity:
    return Parity("post-failover writes", "secondary", "primary", ids=[2],
                  unknown="primary's registry did not answer", unknown_hint="Check it.")


def test_ids_that_differ_refuse_with_each_named_and_the_fix() -> None:
    heard: list[str] = []
    with pytest.raises(CheckFailed) as refused:
        refuse_unless_forced([drifted()], force=False, operation="fail over",
                             ctx=context(heard), unknown_refuses=False)
    assert refused.value.exit_status == ExitStatus.CHECK_FAILED
    assert "schema id 3 resolves to a different schema" in refused.value.message
    assert "schema id 4 resolves to a different schema" in refused.value.message
    assert "Consumers on secondary would fail to decode" in refused.value.message
    assert (refused.value.hint or "").startswith("copy primary's registry into an empty "
                                                 "registry for secondary")
    assert "run again with --force to fail over anyway" in (refused.value.hint or "")
    assert heard == [drifted().describe()]


def test_force_goes_on_and_says_so() -> None:
    heard: list[str] = []
    refuse_unless_forced([drifted(), silent()], force=True, operation="fail back",
                         ctx=context(heard), unknown_refuses=True)
    assert f"--force: going on with {drifted().describe()}" in heard
    assert any(h.startswith("Schema parity of the post-failover writes (secondary -> "
                            "primary) unknown, going on") for h in heard)


def test_a_silent_registry_stops_failback_but_not_failover() -> None:
    heard: list[str] = []
    refuse_unless_forced([silent()], force=False, operation="fail over", ctx=context(heard),
                         unknown_refuses=False)
    assert heard and "unknown, going on: primary's registry did not answer" in heard[-1]
    with pytest.raises(Unreachable) as unknown:
        refuse_unless_forced([silent()], force=False, operation="fail back",
                             ctx=context([]), unknown_refuses=True)
    assert "schema parity is unknown: post-failover writes (secondary -> primary): " \
           "primary's registry did not answer" in unknown.value.message
    assert (unknown.value.hint or "").startswith("Check it. — or run again with --force")


def test_in_parity_passes_quietly_but_for_its_line() -> None:
    heard: list[str] = []
    fine = Parity("mirrored records", "primary", "secondary", ids=[1])
    refuse_unless_forced([fine], force=False, operation="fail over", ctx=context(heard),
                         unknown_refuses=True)
    assert heard == ["mirrored records (primary -> secondary): schemas in parity (1 id "
                     "sampled)"]
