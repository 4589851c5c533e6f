"""Gap results (drctl/gap/result.py): totals add up the partitions."""

from __future__ import annotations

from drctl.gap.result import totals


def test_totals_add_up_partitions() -> None:
    rows = [{"unreplicated": 2, "conflict": 1, "source_records": 10},
            {"unreplicated": 3, "safe": 3, "source_records": 5, "divergent": None}]
    got = totals(rows)
    assert (got["unreplicated"], got["conflict"], got["safe"], got["source_records"],
            got["divergent"]) == (5, 1, 3, 15, 0)
