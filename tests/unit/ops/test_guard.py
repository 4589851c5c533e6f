"""The guard (drctl/ops/guard.py) paces failed rounds with the retry policy."""

from __future__ import annotations

import pytest


def test_guard_paces_failed_rounds_with_the_retry_policy_and_says_when_it_recovers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from drctl.config import parse_config
    from drctl.ops.guard import Guard, RoundResult, run_guard

    config = parse_config({
        "clusters": {"a": {"bootstrap.servers": "x"}, "b": {"bootstrap.servers": "y"}},
        "replication": {"kind": "mirrormaker2", "source": "a", "target": "b"},
        "retry": {"initial_s": 0.01, "max_s": 0.02}})
    rounds = iter([RoundResult(error="no answer"), RoundResult(error="no answer"),
                   RoundResult(error="no answer"), RoundResult(groups=1)])
    stop = threading.Event()

    def next_round(self: Guard) -> RoundResult:
        result = next(rounds)
        if result.error is None:
            stop.set()
        return result

    monkeypatch.setattr(Guard, "run_round", next_round)
    notes: list[str] = []
    run_guard(config, interval_s=0.001, stop=stop, notify=notes.append)
    # Doubling from the policy's first wait up to its cap, then back to the interval.
    assert [n.split("; ")[1] for n in notes[:3]] == [
        "attempt 1, retrying in 0.01s", "attempt 2, retrying in 0.02s",
        "attempt 3, retrying in 0.02s"]
    assert notes[3] == "guard: recovered after 3 failed round(s)"
    assert notes[4].startswith("guard: 0 positions of 1 groups")
