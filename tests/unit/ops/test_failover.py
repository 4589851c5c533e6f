"""Which incident a failover works on (ops/failover.py `incident_to_continue`): a new outage
never continues an old incident."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drctl.config import parse_config
from drctl.errors import UsageError
from drctl.ops.failover import FailoverOptions, incident_to_continue
from drctl.state import FailoverMarker, IncidentPhase


class FakeStore:
    """The marker store's look-ups, from a list."""

    def __init__(self, *markers: FailoverMarker) -> None:
        self.markers = list(markers)

    def open_markers(self, source: str | None = None,
                     target: str | None = None) -> list[FailoverMarker]:
        return [m for m in self.markers if m.status == "open"
                and (source is None or m.source == source)
                and (target is None or m.target == target)]

    def get(self, incident: str) -> FailoverMarker:
        for m in self.markers:
            if m.incident == incident:
                return m
        raise UsageError(f"No failover marker '{incident}'.")


REP = parse_config({
    "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
    "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
}).require_replication()


def _marker(*steps: str, hours_ago: float = 0.0) -> FailoverMarker:
    m = FailoverMarker.new("dc1", "dc2", "mirrormaker2", planned=False)
    m.created_at = (datetime.now(UTC) - timedelta(hours=hours_ago)).isoformat(
        timespec="seconds")
    for step in steps:
        m.record(step)
    return m


def test_phase_follows_the_steps_recorded() -> None:
    assert _marker().phase == IncidentPhase.FAILING_OVER
    assert _marker("failover-point").phase == IncidentPhase.FAILING_OVER
    assert _marker("failover").phase == IncidentPhase.FAILED_OVER
    assert _marker("failover", "failback:gap").phase == IncidentPhase.FAILING_BACK
    assert _marker("failover", "failback:gap", "failback").phase == IncidentPhase.FAILED_BACK
    m = _marker("failover", "failback", "reprotect:quiet")
    assert m.phase == IncidentPhase.REPROTECTING
    assert m.phase.next_command == "drctl reprotect"
    m.status = "closed"
    assert m.phase == IncidentPhase.CLOSED


def test_no_open_incident_opens_a_new_one() -> None:
    marker, superseded = incident_to_continue(FakeStore(), REP, FailoverOptions())
    assert marker.steps == {} and marker.kind == "mirrormaker2" and superseded == []


def test_a_recent_failing_over_incident_is_continued() -> None:
    old = _marker("stop-replication", hours_ago=1)
    marker, _ = incident_to_continue(FakeStore(old), REP, FailoverOptions())
    assert marker is old


@pytest.mark.parametrize("steps", [("failover", "failback:gap"),
                                   ("failover", "failback:gap", "failback"),
                                   ("failover", "failback", "reprotect:quiet")])
def test_an_incident_whose_failback_began_is_never_continued(steps: tuple[str, ...]) -> None:
    old = _marker(*steps)
    for opts in (FailoverOptions(), FailoverOptions(incident=old.incident)):
        with pytest.raises(UsageError) as info:
            incident_to_continue(FakeStore(old), REP, opts)
        assert old.incident in info.value.message and "failback has started" in \
            info.value.message
        assert "--new-incident" in (info.value.hint or "")


def test_an_old_incident_is_continued_only_when_named() -> None:
    old = _marker("failover", hours_ago=30)
    with pytest.raises(UsageError) as info:
        incident_to_continue(FakeStore(old), REP, FailoverOptions())
    assert "was opened 30h ago, longer than the 12h" in info.value.message
    assert f"--incident {old.incident}" in (info.value.hint
                                                                            or "")
    marker, _ = incident_to_continue(FakeStore(old), REP,
                                     FailoverOptions(incident=old.incident))
    assert marker is old


def test_two_open_incidents_of_one_flow_are_named_both() -> None:
    a, b = _marker("failover"), _marker("stop-replication")
    with pytest.raises(UsageError) as info:
        incident_to_continue(FakeStore(a, b), REP, FailoverOptions())
    assert a.incident in info.value.message and b.incident in info.value.message


def test_new_incident_supersedes_the_open_ones() -> None:
    a, b = _marker("failover", "failback"), _marker("failover", hours_ago=40)
    marker, superseded = incident_to_continue(FakeStore(a, b), REP,
                                              FailoverOptions(new_incident=True))
    assert marker.incident not in (a.incident, b.incident) and marker.steps == {}
    assert superseded == [a, b]
    with pytest.raises(UsageError):
        incident_to_continue(FakeStore(a), REP,
                             FailoverOptions(new_incident=True, incident=a.incident))
