"""Which open transactions are hanging, and the commands that abort them."""

from __future__ import annotations

from drctl.kafka.transactions import OpenTransaction, hanging

NOW = 10_000_000


def test_only_transactions_open_longer_than_the_limit_or_of_unknown_age_hang() -> None:
    young = OpenTransaction("orders", 0, 10, 20, NOW - 5_000, 1)
    old = OpenTransaction("orders", 1, 30, 40, NOW - 1_000_000, 2)
    unknown = OpenTransaction("orders", 2, 50, 60, None, 3)
    assert hanging([young, old, unknown], max_age_s=900, now_ms=NOW) == [old, unknown]
    assert old.age_s(NOW) == 1000.0


def test_the_abort_names_the_partition_and_the_transactions_first_offset() -> None:
    t = OpenTransaction("orders", 1, 30, 40, NOW, 2)
    assert t.abort_commands("b:9092") == (
        "kafka-transactions.sh --bootstrap-server b:9092 find-hanging --broker-id 2; "
        "kafka-transactions.sh --bootstrap-server b:9092 abort --topic orders --partition 1 "
        "--start-offset 30")
