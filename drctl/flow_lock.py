"""One lock per replication flow (docs/design.md §6, "Incidents side by side").

Every step that reads and writes what a flow's incidents share — the open incidents' markers
and the shared connectors — runs under it, so two commands (two engineers, two machines) never
interleave such steps: two applications failing over together each see the other's topics and
entries, and no connector config is read, edited and written back over another's edit.

Where it lives: a log of small records. With the failover markers' cluster, a topic beside
their state topic (`<state.topic>.lock`: one partition, the broker's LogAppendTime, a week's
retention), which every machine reaches; without one, a file in the state directory. Who holds
the lock is decided by reading the log in order (`replay`): a claim takes a free lock, or one
whose holder's lease ran out (no beat for `lease`), or one whose holder's process is gone
(seen on the same host); any other claim loses and waits. The holder beats while it holds,
and releases at the end.

The journal: before a step stops a shared connector for a moment, its hold records which ones
(`Hold.pausing`); once they run again the journal is cleared. A holder that dies (or whose
resume failed) leaves the journal in the log, and the next holder gets it (`Hold.left`) to
resume them — so a crash never leaves the rest of the flow stopped unsaid.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import KafkaException, Producer

from drctl.errors import CheckFailed, Unreachable
from drctl.kafka.clients import ClusterClients
from drctl.kafka.records import ReadTimeout, read_all
from drctl.kafka.topics import ensure_topics

LEASE_S = 60.0  # a holder silent this long has died (or is stuck): another may take over
BEAT_S = 10.0
WAIT_S = 900.0  # how long a step waits for the lock held by a live command
POLL_S = 2.0
LOCK_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(7 * 24 * 3600 * 1000),
                     "message.timestamp.type": "LogAppendTime"}


@dataclass(frozen=True)
class LockRecord:
    op: str  # claim | beat | release
    holder: str  # a fresh id per hold
    who: str  # the command holding it, in words
    host: str
    pid: int
    lease_ms: int
    # Connectors stopped for a moment and not yet resumed: the next holder resumes them.
    journal: tuple[str, ...] = ()
    takes_over: str | None = None  # a claim over a holder whose process is gone
    at_ms: int = 0  # the log's time of the record (set when it is read back)

    def to_json(self) -> bytes:
        raw = asdict(self)
        raw.pop("at_ms")
        return json.dumps(raw, sort_keys=True).encode()

    @classmethod
    def from_json(cls, value: bytes, at_ms: int) -> LockRecord:
        raw = json.loads(value)
        return cls(**{**raw, "journal": tuple(raw.get("journal") or ()), "at_ms": at_ms})

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.at_ms / 1000, UTC).strftime("%H:%M:%S UTC")
        return f"{self.who} on {self.host} (pid {self.pid}, since {since})"


@dataclass
class LockState:
    owner: LockRecord | None = None  # the claim holding the lock
    last_ms: int = 0  # the owner's last sign of life
    journal: tuple[str, ...] = ()  # outlives its writer until a holder clears it
    taken_from: LockRecord | None = None  # whom the owner took the lock over from


def replay(records: Sequence[LockRecord]) -> LockState:
    """Who holds the lock after `records` (in log order), and the journal."""
    state = LockState()
    for r in records:
        mine = state.owner is not None and state.owner.holder == r.holder
        if r.op == "claim":
            if state.owner is None:
                state.owner, state.last_ms, state.taken_from = r, r.at_ms, None
            elif mine:
                state.last_ms = r.at_ms
            elif (r.at_ms > state.last_ms + state.owner.lease_ms
                  or r.takes_over == state.owner.holder):
                state.taken_from = state.owner
                state.owner, state.last_ms = r, r.at_ms
        elif mine and r.op == "beat":
            state.last_ms, state.journal = r.at_ms, r.journal
        elif mine and r.op == "release":
            state.owner, state.journal, state.taken_from = None, r.journal, None
    return state


class LockLog(Protocol):
    """Where a flow's lock records are kept, in one order every reader sees."""

    name: str  # where, in words (one process holds a lock of one log once)

    def append(self, record: LockRecord) -> None: ...

    def read(self) -> list[LockRecord]: ...


class FileLog:
    """The lock's log in a file of the state directory (one machine)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)

    def append(self, record: LockRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # one writer at a time: the order is the file's
            stamped = {"at_ms": int(time.time() * 1000),
                       "record": json.loads(record.to_json())}
            fh.write(json.dumps(stamped) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def read(self) -> list[LockRecord]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            if line.strip():
                raw = json.loads(line)
                out.append(LockRecord.from_json(json.dumps(raw["record"]).encode(),
                                                raw["at_ms"]))
        return out


class TopicLog:
    """The lock's log in a topic of the cluster holding the failover markers: one partition
    (one order), the broker's time on every record (one clock), a week's retention."""

    def __init__(self, cluster: ClusterClients, topic: str, key: str) -> None:
        self.cluster, self.topic, self.key = cluster, topic, key.encode()
        self.name = f"{cluster.name}:{topic}"
        self._producer: Producer | None = None
        self._write = threading.Lock()  # the holder's beats and its steps write alike

    def append(self, record: LockRecord) -> None:
        failed: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(str(err))

        with self._write:
            if self._producer is None:
                ensure_topics(self.cluster, {self.topic: 1}, LOCK_TOPIC_CONFIG)
                self._producer = self.cluster.producer(**{
                    "acks": "all", "enable.idempotence": "false",
                    "max.in.flight.requests.per.connection": "1"})
            try:
                self._producer.produce(self.topic, key=self.key, value=record.to_json(),
                                       on_delivery=delivered)
                left = self._producer.flush(30)
            except KafkaException as exc:
                failed.append(str(exc))
                left = 0
            if left or failed:
                self._producer = None
                raise Unreachable(
                    f"Could not write the flow's lock to {self.topic} on "
                    f"'{self.cluster.name}': {failed[0] if failed else 'no acknowledgement'}.",
                    f"Check that '{self.cluster.name}' answers, then run the command again.")

    def read(self) -> list[LockRecord]:
        try:
            records = read_all(self.cluster, self.topic, timeout_s=30)
        except (KafkaException, ReadTimeout) as exc:
            raise Unreachable(f"Could not read the flow's lock in {self.topic} on "
                              f"'{self.cluster.name}': {exc}.",
                              f"Check that '{self.cluster.name}' answers, then run the "
                              "command again.") from exc
        return [LockRecord.from_json(r.value, r.timestamp_ms) for r in records
                if r.key == self.key and r.value is not None]


class FlowBusy(CheckFailed):
    """Another command held the flow's lock for longer than a step waits."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Hold:
    """The lock, held: what the step found left (`left`, `taken_from`) and how it records
    its own pauses."""

    lock: FlowLock
    claim: LockRecord
    left: tuple[str, ...] = ()  # connectors an earlier holder left stopped: resume them
    taken_from: LockRecord | None = None
    journal: tuple[str, ...] = ()
    lost_to: LockRecord | None = None  # set when another claim took the lock over
    _depth: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def write(self, op: str, journal: Sequence[str]) -> None:
        self.journal = tuple(journal)
        self.lock.log.append(replace(self.claim, op=op, journal=self.journal,
                                     takes_over=None))

    def check(self) -> None:
        """Refuse to go on when another command took the lock over (this one was silent
        longer than its lease: stuck, or cut off from the log)."""
        if self.lost_to is not None:
            raise CheckFailed(
                f"The flow's lock was taken over by {self.lost_to.describe()} while this "
                "command held it: it stops before changing anything more.",
                "Let that command finish, then run this one again.")

    @contextmanager
    def pausing(self, connectors: Sequence[str]) -> Iterator[None]:
        """Around a step that may stop `connectors` for a moment: recorded before, cleared
        once it returned (left on failure: the next holder resumes them)."""
        self.check()
        if not connectors:
            yield
            return
        self.write("beat", sorted({*self.journal, *connectors}))
        yield
        self.write("beat", [c for c in self.journal if c not in connectors])

    def cleared(self) -> None:
        """What was left stopped runs again: the journal is empty."""
        self.left = ()
        self.write("beat", [])


class FlowLock:
    """The lock of one flow (`key`) in `log`."""

    def __init__(self, log: LockLog, key: str, who: str, *, lease_s: float = LEASE_S,
                 wait_s: float = WAIT_S, notify: Callable[[str], None] = lambda _: None
                 ) -> None:
        self.log, self.key, self.who = log, key, who
        self.lease_s, self.wait_s, self.notify = lease_s, wait_s, notify

    def _record(self, holder: str, takes_over: str | None = None) -> LockRecord:
        return LockRecord("claim", holder, self.who, socket.gethostname(), os.getpid(),
                          int(self.lease_s * 1000), takes_over=takes_over)

    def acquire(self) -> Hold:
        holder = secrets.token_hex(8)
        started = time.monotonic()
        say_at = 0.0
        while True:
            state = replay(self.log.read())
            owner = state.owner
            takes_over = None
            if owner is not None and owner.host == socket.gethostname() \
                    and (not _alive(owner.pid) or (owner.pid == os.getpid()
                                                   and owner.holder not in _LIVE)):
                # Its process is gone (or it is this one's, and no step holds it any more:
                # its release was lost): no need to wait its lease.
                takes_over = owner.holder
            silent_s = time.time() - state.last_ms / 1000
            if owner is None or takes_over or silent_s > owner.lease_ms / 1000:
                claim = self._record(holder, takes_over)
                _LIVE.add(holder)
                self.log.append(claim)
                state = replay(self.log.read())
                if state.owner is not None and state.owner.holder == holder:
                    hold = Hold(self, state.owner, state.journal, state.taken_from,
                                state.journal)
                    if state.taken_from is not None:
                        self.notify(f"Took the flow's lock over from "
                                    f"{state.taken_from.describe()}: it stopped answering")
                    return hold
                _LIVE.discard(holder)
                owner = state.owner
            waited = time.monotonic() - started
            if owner is not None and waited > self.wait_s:
                raise FlowBusy(
                    f"The flow is locked by {owner.describe()}: it changes the flow's "
                    f"incidents or shared connectors (waited {waited:.0f} s).",
                    "Let it finish, then run this command again.")
            if owner is not None and waited >= say_at:
                say_at = waited + 15
                self.notify(f"Waiting for the flow's lock, held by {owner.describe()}")
            time.sleep(POLL_S)

    def _beat(self, hold: Hold) -> None:
        while not hold._stop.wait(min(BEAT_S, self.lease_s / 3)):
            try:
                hold.write("beat", hold.journal)
                owner = replay(self.log.read()).owner
            except Exception:  # noqa: BLE001 - a missed beat is retried; the lease decides
                continue
            if owner is None or owner.holder != hold.claim.holder:
                hold.lost_to = owner or hold.claim
                return

    @contextmanager
    def held(self) -> Iterator[Hold]:
        """The lock for the block inside; reentrant within one thread."""
        key = (self.log.name, self.key, threading.get_ident())
        hold = _HELD.get(key)
        if hold is not None:
            hold._depth += 1
            try:
                yield hold
            finally:
                hold._depth -= 1
            return
        hold = self.acquire()
        _HELD[key] = hold
        beat = threading.Thread(target=self._beat, args=(hold,), daemon=True,
                                name="drctl-flow-lock")
        beat.start()
        try:
            yield hold
        finally:
            hold._stop.set()
            beat.join(5)
            del _HELD[key]
            _LIVE.discard(hold.claim.holder)
            if hold.lost_to is None:
                try:
                    hold.write("release", hold.journal)
                except Exception:  # noqa: BLE001 - the step's own outcome matters more
                    self.notify(f"Could not release the flow's lock ({self.log.name}): it "
                                f"frees itself once its lease of {self.lease_s:.0f} s ran out")


# The holds of this process, by flow and thread: a step inside another step's hold (the
# whole flow's return finishing the returns that waited for it) shares it.
_HELD: dict[tuple[str, str, int], Hold] = {}
# The claims of this process that a step may still hold: any other of its own claims in the
# log is one whose release was lost.
_LIVE: set[str] = set()


def lock_topic(state_topic: str) -> str:
    """The lock's topic beside the state topic."""
    return f"{state_topic}.lock"
