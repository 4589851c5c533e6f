"""The gap plan file (drctl/gap/plan.py): it round-trips, is owner-only, and keeps
secrets out of its public form."""

from __future__ import annotations

import stat
from pathlib import Path

from drctl.gap.plan import GapPlan, TopicPlan


def test_plan_file_round_trip_and_secrets(tmp_path: Path) -> None:
    topic = TopicPlan("orders", "primary.orders", [0, 1], {0: 0, 1: 3}, {0: 9, 1: 9},
                      {0: 0, 1: 0}, {0: 7, 1: 8}, True, "orders", {0: 2, 1: 2}, {0: 4, 1: 2})
    plan = GapPlan("diff", "mirrormaker2", "primary", "secondary",
                   {"kafka.bootstrap.servers": "a:1", "kafka.sasl.jaas.config": "secret"},
                   {"kafka.bootstrap.servers": "b:1"}, [topic], str(tmp_path / "out"),
                   check_order=True)
    path = plan.write(tmp_path / "plan.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = GapPlan.from_json(path.read_text())
    assert again == plan
    assert again.topics[0].target_end == {0: 7, 1: 8}
    assert "secret" not in str(plan.public())
