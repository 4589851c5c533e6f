"""The flow's lock (drctl/flow_lock.py): who holds it after a log of claims, beats and
releases; a holder that died is seen and taken over, and what it left stopped is handed on;
two commands at once take turns."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from drctl import flow_lock
from drctl.errors import CheckFailed
from drctl.flow_lock import FileLog, FlowBusy, FlowLock, LockRecord, replay


def rec(op: str, holder: str, at_s: float, journal: tuple[str, ...] = (),
        takes_over: str | None = None, lease_s: float = 60) -> LockRecord:
    return LockRecord(op, holder, f"drctl {holder}", "h", 1, int(lease_s * 1000), journal,
                      takes_over, int(at_s * 1000))


def test_the_first_claim_holds_until_its_release() -> None:
    state = replay([rec("claim", "a", 0), rec("claim", "b", 1)])
    assert state.owner is not None and state.owner.holder == "a"
    state = replay([rec("claim", "a", 0), rec("claim", "b", 1), rec("release", "a", 2),
                    rec("claim", "b", 3)])
    assert state.owner is not None and state.owner.holder == "b"
    assert state.taken_from is None
    # b's claim made while a held it is not remembered: b claims again once it is free.
    assert replay([rec("claim", "a", 0), rec("claim", "b", 1),
                   rec("release", "a", 2)]).owner is None


def test_a_holder_silent_past_its_lease_is_taken_over() -> None:
    state = replay([rec("claim", "a", 0), rec("beat", "a", 50), rec("claim", "b", 100)])
    assert state.owner is not None and state.owner.holder == "a"  # beat at 50: alive
    state = replay([rec("claim", "a", 0), rec("beat", "a", 50), rec("claim", "b", 111)])
    assert state.owner is not None and state.owner.holder == "b"
    assert state.taken_from is not None and state.taken_from.holder == "a"
    # A claim that saw the holder's process gone need not wait its lease.
    state = replay([rec("claim", "a", 0), rec("claim", "b", 1, takes_over="a")])
    assert state.owner is not None and state.owner.holder == "b"
    # The old holder's later beats change nothing.
    state = replay([rec("claim", "a", 0), rec("claim", "b", 1, takes_over="a"),
                    rec("beat", "a", 2, ("src",))])
    assert state.owner is not None and state.owner.holder == "b" and state.journal == ()


def test_the_journal_outlives_the_holder_that_wrote_it() -> None:
    """A holder that stopped a connector for a moment and died (or released with its resume
    failed) leaves the journal to whoever holds the lock next."""
    died = [rec("claim", "a", 0), rec("beat", "a", 1, ("src", "cp")),
            rec("claim", "b", 200)]
    state = replay(died)
    assert state.owner is not None and state.owner.holder == "b"
    assert state.journal == ("src", "cp")
    released = replay([rec("claim", "a", 0), rec("beat", "a", 1, ("src",)),
                       rec("release", "a", 2, ("src",)), rec("claim", "b", 3)])
    assert released.journal == ("src",)
    cleared = replay([*died, rec("beat", "b", 201, ())])
    assert cleared.journal == ()


def test_a_record_survives_the_log() -> None:
    r = rec("beat", "a", 5, ("src",), "z")
    assert LockRecord.from_json(r.to_json(), r.at_ms) == r


def _lock(tmp_path: Path, who: str, wait_s: float = flow_lock.WAIT_S) -> FlowLock:
    return FlowLock(FileLog(tmp_path / "locks" / "a-b.jsonl"), "a->b", who, wait_s=wait_s)


def test_two_commands_at_once_take_turns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.setattr(flow_lock, "POLL_S", 0.05)
    inside: list[str] = []
    overlapped: list[bool] = []
    heard: list[str] = []

    def step(who: str) -> None:
        with _lock(tmp_path, who, wait_s=30).held():
            overlapped.append(bool(inside))
            inside.append(who)
            time.sleep(0.3)
            inside.remove(who)

    lock_b = FlowLock(FileLog(tmp_path / "locks" / "a-b.jsonl"), "a->b", "drctl b",
                      wait_s=30, notify=heard.append)
    with _lock(tmp_path, "drctl a").held():
        other = threading.Thread(target=step, args=("drctl c",))
        other.start()
        time.sleep(0.3)
        assert other.is_alive()  # waiting
        with lock_b.held():  # the same process, the same flow: the hold is shared
            pass
    other.join(10)
    assert overlapped == [False]
    assert replay(FileLog(tmp_path / "locks" / "a-b.jsonl").read()).owner is None
    assert heard == []


def test_a_lock_held_too_long_is_refused_naming_its_holder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flow_lock, "POLL_S", 0.05)
    log = FileLog(tmp_path / "locks" / "a-b.jsonl")
    log.append(LockRecord("claim", "other", "drctl failover --app B", "elsewhere", 7, 60_000))
    heard: list[str] = []
    with pytest.raises(FlowBusy) as caught:
        FlowLock(log, "a->b", "drctl failover --app A", wait_s=0.2, notify=heard.append
                 ).acquire()
    assert "drctl failover --app B on elsewhere (pid 7" in caught.value.message
    assert heard and "held by drctl failover --app B" in heard[0]


def test_a_holder_whose_process_died_is_taken_over_at_once_with_what_it_left(
        tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    log = FileLog(tmp_path / "locks" / "a-b.jsonl")
    gone = LockRecord("claim", "gone", "drctl reprotect", socket.gethostname(), pid, 600_000)
    log.append(gone)
    log.append(LockRecord("beat", "gone", "drctl reprotect", socket.gethostname(), pid,
                          600_000, ("src",)))
    heard: list[str] = []
    started = time.monotonic()
    with FlowLock(log, "a->b", "drctl failover", notify=heard.append).held() as hold:
        assert time.monotonic() - started < 5  # not its ten-minute lease
        assert hold.left == ("src",)
        assert hold.taken_from is not None and hold.taken_from.holder == "gone"
        hold.cleared()
    assert heard and "Took the flow's lock over from drctl reprotect" in heard[0]
    assert replay(log.read()).journal == ()


def test_pausing_is_journaled_before_and_cleared_after(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "locks" / "a-b.jsonl")
    with FlowLock(log, "a->b", "drctl failover").held() as hold:
        with hold.pausing(["src", "cp"]):
            assert replay(log.read()).journal == ("cp", "src")
        assert replay(log.read()).journal == ()
        with pytest.raises(RuntimeError), hold.pausing(["src"]):
            raise RuntimeError("Connect dropped")
    # Released with the journal: the next holder resumes src.
    with FlowLock(log, "a->b", "drctl reprotect").held() as hold:
        assert hold.left == ("src",)


def test_a_holder_whose_lock_was_taken_over_stops(tmp_path: Path) -> None:
    """A holder cut off longer than its lease has lost the lock: its beats find the new
    holder, and its next step refuses instead of changing anything."""
    log = FileLog(tmp_path / "locks" / "a-b.jsonl")
    with pytest.raises(CheckFailed, match="taken over by drctl x"), \
            FlowLock(log, "a->b", "drctl failover", lease_s=0.3).held() as hold:
        log.append(LockRecord("claim", "thief", "drctl x", "elsewhere", os.getpid(), 60_000,
                              takes_over=hold.claim.holder))
        end = time.monotonic() + 10
        while hold.lost_to is None and time.monotonic() < end:
            time.sleep(0.05)  # until the holder's next beat reads the log
        with hold.pausing(["src"]):
            pass
    # It never released what it no longer held.
    assert [r.op for r in log.read() if r.holder == hold.claim.holder][-1] == "beat"
    assert replay(log.read()).owner.holder == "thief"  # type: ignore[union-attr]


def test_a_release_that_was_lost_does_not_hold_up_this_process(tmp_path: Path) -> None:
    """A cluster that dropped as a step ended loses its release; the next step of the same
    process (a run again after the drop) takes the lock at once, not after the lease."""

    class Dropping(FileLog):
        def append(self, record: LockRecord) -> None:
            if record.op == "release" and not getattr(self, "dropped", False):
                self.dropped = True
                raise OSError("the cluster dropped")
            super().append(record)

    log = Dropping(tmp_path / "locks" / "a-b.jsonl")
    heard: list[str] = []
    with FlowLock(log, "a->b", "drctl failback", lease_s=600, notify=heard.append
                  ).held() as first:
        pass
    assert heard and "Could not release the flow's lock" in heard[0]
    started = time.monotonic()
    with FlowLock(log, "a->b", "drctl failback").held() as again:
        assert time.monotonic() - started < 5
        assert again.taken_from is not None and again.taken_from.holder == first.claim.holder
