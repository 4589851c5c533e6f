"""Gap results (drctl/gap/result.py): totals add up the partitions."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from drctl.gap.result import tally, totals


def test_totals_add_up_partitions() -> None:
    rows = [{"unreplicated": 2, "conflict": 1, "source_records": 10},
            {"unreplicated": 3, "safe": 3, "source_records": 5, "divergent": None}]
    got = totals(rows)
    assert (got["unreplicated"], got["conflict"], got["safe"], got["source_records"],
            got["divergent"]) == (5, 1, 3, 15, 0)


def _written(path: Path, rows: list[tuple[str, int, int, int, str | None, int]]) -> Path:
    """Records as the job writes them, in two part files (an engine's tasks), unsorted."""
    path.mkdir()
    names = ["topic", "partition", "offset", "timestamp_ms", "classification",
             "partition_writes"]
    for i, part in enumerate((rows[::2], rows[1::2])):
        pq.write_table(pa.table({n: [r[j] for r in part] for j, n in enumerate(names)}),
                       path / f"part-{i:05d}.parquet")
    (path / "_SUCCESS").touch()  # what Spark writes beside them
    return path


def test_the_tally_of_the_records_written(tmp_path: Path) -> None:
    records = _written(tmp_path / "records", [
        ("orders", 0, 7, 109, "safe", 0), ("orders", 0, 3, 101, "conflict", 2),
        ("orders", 1, 4, 95, "unkeyed", 1), ("orders", 0, 5, 90, "safe", 0),
        ("orders", 1, 6, 99, "unkeyed", 0), ("pay", 0, 1, 50, "safe", 0)])
    found = tally(records, check_order=True)
    # The first and last offsets' timestamps, not the smallest and largest timestamps.
    assert found[("orders", 0)] == {
        "unreplicated": 3, "first_offset": 3, "last_offset": 7, "first_timestamp_ms": 101,
        "last_timestamp_ms": 109, "classes": {"safe": 2, "conflict": 1}}
    assert found[("orders", 1)] == {
        "unreplicated": 2, "first_offset": 4, "last_offset": 6, "first_timestamp_ms": 95,
        "last_timestamp_ms": 99, "classes": {"unkeyed": 2}, "flagged": 1}
    assert found[("pay", 0)]["unreplicated"] == 1
    without = tally(records, check_order=False)
    assert without[("orders", 1)] == {"unreplicated": 2, "first_offset": 4, "last_offset": 6,
                                      "first_timestamp_ms": 95, "last_timestamp_ms": 99}


def test_no_records_no_tally(tmp_path: Path) -> None:
    assert tally(tmp_path / "nothing", check_order=True) == {}
    assert tally(_written(tmp_path / "empty", []), check_order=True) == {}
