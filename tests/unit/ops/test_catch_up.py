"""Catch-up waits you can read (drctl/ops/steps/catch_up.py): the records left, and the
timeout that names them."""

from __future__ import annotations

from drctl.errors import ExitStatus
from drctl.ops.steps.catch_up import catch_up_timed_out, describe_left


def test_records_left_read_well() -> None:
    left = {("orders", 0): 1000, ("orders", 1): 0, ("orders", 2): 150, ("pay", 0): None}
    assert describe_left(left) == (
        "1,150 record(s) left in 3 partition(s): orders[0] 1,000, orders[2] 150, pay[0] ? "
        "(? = not countable: the copy holds writes of its own)")
    many = {("t", p): p + 1 for p in range(8)}
    assert describe_left(many).startswith("36 record(s) left in 8 partition(s): t[7] 8, t[6] 7")
    assert describe_left(many).endswith("t[3] 4 and 3 more")
    assert describe_left({("t", 0): 0}) == "no records left"
    error = catch_up_timed_out("Reverse replication", 1800, {("orders", 0): 12}, "Check it.")
    assert error.exit_status == ExitStatus.FAILURE
    assert error.message == ("Reverse replication did not catch up in 30m: 12 record(s) left "
                             "in 1 partition(s): orders[0] 12.")
