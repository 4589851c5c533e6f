"""Benchmarks count requests from librdkafka's statistics: itemized by API, the admin
client's group-offset requests as the rest of what each broker connection sent."""

from __future__ import annotations

import json
from pathlib import Path

from drctl.kafka.request_count import UNITEMIZED, RequestCount


def _stats(name: str, brokers: dict[str, tuple[int, dict[str, int]]]) -> str:
    return json.dumps({"name": name, "brokers": {
        b: {"tx": tx, "req": req} for b, (tx, req) in brokers.items()}})


def test_each_clients_latest_statistics_are_summed_by_request_type(tmp_path: Path) -> None:
    count = RequestCount(tmp_path / "requests.json")
    count.record(_stats("admin#1", {"b1": (5, {"Metadata": 1, "DescribeGroups": 2})}))
    # Cumulative: the client's later figures replace its earlier ones.
    count.record(_stats("admin#1", {"b1": (9, {"Metadata": 1, "DescribeGroups": 4}),
                                    "b2": (3, {"Metadata": 1, "Fetch": 0})}))
    count.record(_stats("consumer#2", {"b1": (4, {"Fetch": 4})}))
    totals = count.totals()
    assert totals["by_api"] == {"DescribeGroups": 4, "Fetch": 4, "Metadata": 2,
                                UNITEMIZED: 6}  # 9 - 5 on b1, 3 - 1 on b2
    assert totals["requests"] == 16 and totals["clients"] == 2
    count.write()
    assert json.loads((tmp_path / "requests.json").read_text())["requests"] == 16
