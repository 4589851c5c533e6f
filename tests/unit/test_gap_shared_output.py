"""On a Spark cluster the driver checks that it sees every record the executors wrote: an
output directory that is not shared would make reconcile miss records."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from drctl.errors import DrctlError
from drctl.gap.result import RECORDS_DIR, GapResult
from drctl.gap.runner import check_shared_output


def result_with(tmp_path: Path, counted: int, files: list[int]) -> GapResult:
    records = tmp_path / RECORDS_DIR
    records.mkdir(parents=True)
    for i, rows in enumerate(files):
        pq.write_table(pa.table({"offset": list(range(rows))}),
                       records / f"part-{i:05d}.parquet")
    return GapResult(out_dir=tmp_path, kind="multiset", replication_kind="mirrormaker2",
                     check_order=False,
                     partitions=[{"unreplicated": counted - counted // 2},
                                 {"unreplicated": counted // 2}])


def test_every_record_visible_to_the_driver_passes(tmp_path: Path) -> None:
    result = result_with(tmp_path, 7, [3, 4])
    assert result.records_on_disk() == 7
    check_shared_output(result, "spark://127.0.0.1:7077")


def test_records_missing_on_the_driver_name_the_output_directory(tmp_path: Path) -> None:
    result = result_with(tmp_path, 7, [3])  # an executor elsewhere wrote the other 4
    with pytest.raises(DrctlError) as err:
        check_shared_output(result, "spark://10.0.0.5:7077")
    assert "7 unreplicated" in str(err.value) and "holds 3" in str(err.value)
    assert "shared storage" in (err.value.hint or "")


def test_a_local_master_is_not_checked(tmp_path: Path) -> None:
    check_shared_output(result_with(tmp_path, 7, [3]), "local[2]")
