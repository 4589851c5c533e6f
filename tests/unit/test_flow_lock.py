"""The flow's lock (drctl/flow_lock.py): who holds it after a log of claims, beats and
releases; a holder that died is seen and taken over, and what it left stopped is handed on;
two commands at once take turns."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from drctl import flow_lock
from drctl.errors import CheckFailed, ExitStatus
from drctl.flow_lock import LEASE_S, FileLog, FlowBusy, FlowLock, LockRecord, replay
from drctl.kafka.connect_rest import ConnectClient, LockNotHeld


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
    # Its claim says where it ran: this boot and pid namespace (Linux), where a pid is one
    # process.
    here = f"{flow_lock._this_boot_and_namespace()}/12345"
    log = FileLog(tmp_path / "locks" / "a-b.jsonl")
    gone = LockRecord("claim", "gone", "drctl reprotect", socket.gethostname(), pid, 600_000,
                      process=here)
    log.append(gone)
    log.append(LockRecord("beat", "gone", "drctl reprotect", socket.gethostname(), pid,
                          600_000, ("src",), process=here))
    heard: list[str] = []
    # wait_s=0: taken at its first look, or FlowBusy — not its ten-minute lease.
    with FlowLock(log, "a->b", "drctl failover", wait_s=0, notify=heard.append).held() as hold:
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
    with pytest.raises(LockNotHeld, match="taken over by drctl x") as refused, \
            FlowLock(log, "a->b", "drctl failover", lease_s=0.3).held() as hold:
        log.append(LockRecord("claim", "thief", "drctl x", "elsewhere", os.getpid(), 60_000,
                              takes_over=hold.claim.holder))
        end = time.monotonic() + 10
        while hold.lost_to is None and time.monotonic() < end:
            time.sleep(0.05)  # until the holder's next beat reads the log
        with hold.pausing(["src"]):
            pass
    assert refused.value.exit_status == ExitStatus.CHECK_FAILED
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
    with FlowLock(log, "a->b", "drctl failback", wait_s=0).held() as again:  # at once
        assert again.taken_from is not None and again.taken_from.holder == first.claim.holder


def _claimed(log: FileLog, **fields: object) -> None:
    base: dict[str, object] = {"op": "claim", "holder": "other", "who": "drctl failover",
                               "host": socket.gethostname(), "pid": os.getpid(),
                               "lease_ms": 60_000}
    log.append(LockRecord(**{**base, **fields}))  # type: ignore[arg-type]


@pytest.mark.parametrize("case", ["pid 1 in another container", "a same-named bastion"])
def test_a_pid_and_a_host_name_prove_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             case: str) -> None:
    """Issue 51 #3: a claim from another pid namespace (pid 1 in two containers, which
    `--network host` gives the same host name) or another machine named alike holds the
    lock, whatever its pid means here: the claim waits for its lease, never takes it over at
    once saying it stopped answering."""
    monkeypatch.setattr(flow_lock, "POLL_S", 0.05)
    log = FileLog(tmp_path / "locks" / "a-b.jsonl")
    if case == "pid 1 in another container":  # this process's pid, in its own namespace
        _claimed(log, process="b0a7-1d/pid:[4026532999]/77")
    else:  # a pid no process has here, on another machine with this machine's name
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)
        _claimed(log, pid=int(dead.stdout), process="another-boot/pid:[4026531836]/5")
    heard: list[str] = []
    with pytest.raises(FlowBusy, match="locked by drctl failover"):
        FlowLock(log, "a->b", "drctl failback", wait_s=0.3, notify=heard.append).acquire()
    assert not any("Took the flow's lock over" in line for line in heard)
    assert replay(log.read()).owner.holder == "other"  # type: ignore[union-attr]


def test_a_reused_pid_is_a_process_gone(tmp_path: Path) -> None:
    """In this boot and pid namespace, a process with the claim's pid that started at another
    time is not the holder (the pid was reused): taken over at once."""
    log = FileLog(tmp_path / "locks" / "a-b.jsonl")
    where = flow_lock._this_boot_and_namespace()
    assert where is not None  # Linux
    started = int(flow_lock._start_time(os.getpid()) or 0)
    _claimed(log, process=f"{where}/{started + 1}", lease_ms=600_000)
    # wait_s=0: taken at its first look, or FlowBusy — not its ten-minute lease.
    with FlowLock(log, "a->b", "drctl failback", wait_s=0).held() as hold:
        assert hold.taken_from is not None and hold.taken_from.holder == "other"
    # And this very process, as its claim records it, is alive: waited for.
    _claimed(log, holder="alive", process=flow_lock._this_process())
    with pytest.raises(FlowBusy):
        FlowLock(log, "a->b", "drctl failback", wait_s=0.3).acquire()


class _SkewedLog:
    """A lock log whose writer stamps records with its own clock, `skew_s` off this
    machine's (a broker's LogAppendTime)."""

    def __init__(self, skew_s: float) -> None:
        self.name = "skewed"
        self.skew_s = skew_s
        self.records: list[LockRecord] = []

    def now_ms(self) -> int:
        return int((time.time() + self.skew_s) * 1000)

    def append(self, record: LockRecord) -> None:
        self.records.append(replace(record, at_ms=self.now_ms()))

    def read(self) -> list[LockRecord]:
        return list(self.records)


def test_a_lease_is_judged_on_the_logs_clock_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The log's (broker's) clock ten minutes ahead of this machine's: a holder silent for
    two minutes by the log's clock is taken over at once (this machine's clock would say its
    last beat is eight minutes in the future); ten minutes behind: a holder that beat just
    now is waited for, with one claim in the log, not one every poll."""
    monkeypatch.setattr(flow_lock, "POLL_S", 0.05)
    ahead = _SkewedLog(600)
    ahead.records.append(LockRecord("claim", "silent", "drctl failover", "elsewhere", 7,
                                    60_000, at_ms=ahead.now_ms() - 120_000))
    heard: list[str] = []
    lock = FlowLock(ahead, "a->b", "drctl failback", wait_s=5, notify=heard.append)
    with lock.held() as hold:
        assert hold.taken_from is not None and hold.taken_from.holder == "silent"
    assert "it beat no more within its lease of 60 s" in heard[0]

    behind = _SkewedLog(-600)
    behind.append(LockRecord("claim", "busy", "drctl failover", "elsewhere", 7, 60_000))
    with pytest.raises(FlowBusy):
        FlowLock(behind, "a->b", "drctl failback", wait_s=0.5).acquire()
    assert [r.holder for r in behind.records] == ["busy", behind.records[1].holder]


def test_a_record_from_a_later_drctl_is_read() -> None:
    """Fields a later drctl adds are left out (an older drctl must not fail on every record
    for the topic's week); a record without what a lock needs is refused, named."""
    later = json.loads(rec("claim", "a", 5).to_json())
    later.update({"priority": 3, "fence": {"epoch": 2}})
    assert LockRecord.from_json(json.dumps(later).encode(), 5000) == rec("claim", "a", 5)
    with pytest.raises(flow_lock.LockUnreadable, match="cannot be read"):
        LockRecord.from_json(b'{"op": "claim"}', 0)


class _Worker(ConnectClient):
    """A Connect client that records the calls that would reach the worker."""

    def __init__(self) -> None:
        super().__init__("http://connect.invalid:8083")
        self.sent: list[tuple[str, str]] = []

    def _once(self, method: str, path: str, body: Any, timeout_s: float,
              content_type: str | None = None) -> Any:
        self.sent.append((method, path))
        return {}


def test_a_holder_that_lost_its_lock_changes_no_connector(tmp_path: Path) -> None:
    """Taken over while it held the lock: its beat notices, and every connector change after
    that is refused before it is sent (reads still go), not only the next pause."""
    log = FileLog(tmp_path / "locks" / "a-b.jsonl")
    worker = _Worker()
    heard: list[str] = []
    with pytest.raises(LockNotHeld, match="taken over by drctl x") as refused, \
            FlowLock(log, "a->b", "drctl failover", lease_s=0.3,
                     notify=heard.append).held() as hold:
        worker.pause("src")  # held: sent
        log.append(LockRecord("claim", "thief", "drctl x", "elsewhere", 9, 60_000,
                              takes_over=hold.claim.holder))
        end = time.monotonic() + 10
        while hold.lost_to is None and time.monotonic() < end:
            time.sleep(0.05)  # until the holder's next beat reads the log
        worker.status("src")
        worker.resume("src")
    assert refused.value.exit_status == ExitStatus.CHECK_FAILED
    assert worker.sent == [("PUT", "/connectors/src/pause"), ("GET", "/connectors/src/status")]
    assert any("this command changes no shared connector any more" in h for h in heard)


def test_a_holder_cut_off_from_the_log_stops_before_its_lease_runs_out(
        tmp_path: Path) -> None:
    """Its beats no longer reach the log (the lock's cluster dropped): before the lease could
    run out for another machine, its connector changes are refused (exit 4, to run again),
    and a stop it made is left to the lock's journal, not resumed over another holder."""

    class Cut(FileLog):
        cut = False

        def append(self, record: LockRecord) -> None:
            if self.cut:
                raise OSError("the cluster dropped")
            super().append(record)

    now = [1000.0]
    log = Cut(tmp_path / "locks" / "a-b.jsonl")
    worker = _Worker()
    with FlowLock(log, "a->b", "drctl failover", clock=lambda: now[0]).held() as hold, \
            pytest.raises(LockNotHeld, match="could not be renewed") as refused, \
            hold.pausing(["src"]):
        worker.stop("src")
        log.cut = True
        now[0] += 0.5 * LEASE_S  # within its lease: still its own
        worker.put_config("src", {})
        now[0] += 0.4 * LEASE_S  # most of it gone, no beat confirmed since
        worker.resume("src")
    assert refused.value.exit_status == ExitStatus.UNREACHABLE
    assert refused.value.transient  # a run again, once the cluster answers
    assert [m for m, _ in worker.sent] == ["PUT", "PUT"]
    assert replay(log.read()).journal == ("src",)  # the next holder resumes it


class _Cluster:
    """A cluster's admin client and producer, enough for the lock's topic: its configs, and
    an alter that the broker may refuse."""

    name, bootstrap = "secondary", "kafka-2:9092"
    deadline_s, notify = 5.0, None  # as ClusterClients: cluster_metadata reads them

    def __init__(self, configs: dict[str, dict[str, str]], refuse: bool = False) -> None:
        self.configs = configs
        self.refuse = refuse
        self.written: list[bytes] = []

    @staticmethod
    def _done(value: Any) -> Future[Any]:
        future: Future[Any] = Future()
        if isinstance(value, BaseException):
            future.set_exception(value)
        else:
            future.set_result(value)
        return future

    def admin(self) -> _Cluster:
        return self

    def list_topics(self, timeout: float = 0) -> Any:
        partition = SimpleNamespace(leader=1)
        return SimpleNamespace(topics={t: SimpleNamespace(partitions={0: partition})
                                       for t in self.configs})

    def create_topics(self, new: list[Any]) -> dict[str, Future[Any]]:
        for topic in new:
            self.configs[topic.topic] = dict(topic.config)
        return {t.topic: self._done(None) for t in new}

    def describe_configs(self, resources: list[Any], request_timeout: float = 0) -> Any:
        return {r: self._done({k: SimpleNamespace(value=v)
                               for k, v in self.configs[r.name].items()})
                for r in resources}

    def incremental_alter_configs(self, resources: list[Any], request_timeout: float = 0
                                  ) -> Any:
        if self.refuse:
            return {r: self._done(KafkaException(KafkaError(
                KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed")))
                for r in resources}
        for r in resources:
            self.configs[r.name].update({e.name: e.value for e in r.incremental_configs})
        return {r: self._done(None) for r in resources}

    def producer(self, **_: Any) -> _Cluster:
        return self

    def produce(self, topic: str, key: bytes, value: bytes, on_delivery: Any) -> None:
        self.written.append(value)
        on_delivery(None, None)

    def flush(self, _timeout: float) -> int:
        return 0


def test_a_lock_topic_stamped_by_its_writers_is_set_to_the_brokers_time() -> None:
    """Issue 51 #3: a lock topic that exists with CreateTime (made by a tool or a person that
    left the setting out) would compare two machines' clocks: set to LogAppendTime before
    the first record, said; a broker that refuses the change refuses the lock, naming the
    topic and the command that sets it."""
    topic = "_drctl_state.lock"
    cluster = _Cluster({topic: {"message.timestamp.type": "CreateTime"}})
    heard: list[str] = []
    log = flow_lock.TopicLog(cluster, topic, "a->b", heard.append)  # type: ignore[arg-type]
    log.append(rec("claim", "a", 0))
    assert cluster.configs[topic]["message.timestamp.type"] == "LogAppendTime"
    assert heard and "set it to the broker's (message.timestamp.type=LogAppendTime)" in heard[0]
    assert len(cluster.written) == 1

    refused = _Cluster({topic: {"message.timestamp.type": "CreateTime"}}, refuse=True)
    log = flow_lock.TopicLog(refused, topic, "a->b")  # type: ignore[arg-type]
    with pytest.raises(CheckFailed, match="stamps its records with the writers' clocks") as no:
        log.append(rec("claim", "a", 0))
    assert "Topic authorization failed" in no.value.message
    assert "--entity-name _drctl_state.lock --add-config " \
           "message.timestamp.type=LogAppendTime" in (no.value.hint or "")
    assert refused.written == []

    # A topic drctl creates has it from the start; nothing to say.
    fresh = _Cluster({})
    heard.clear()
    flow_lock.TopicLog(fresh, topic, "a->b", heard.append).append(  # type: ignore[arg-type]
        rec("claim", "a", 0))
    assert fresh.configs[topic]["message.timestamp.type"] == "LogAppendTime"
    assert heard == []
