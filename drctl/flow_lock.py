"""One lock per replication flow (docs/design.md §6, "Incidents side by side").

Every step that reads and writes what a flow's incidents share — the open incidents' markers
and the shared connectors — runs under it, so two commands (two engineers, two machines) never
interleave such steps: two applications failing over together each see the other's topics and
entries, and no connector config is read, edited and written back over another's edit.

Where it lives: a log of small records. With the failover markers' cluster, a topic beside
their state topic (`<state.topic>.lock`: one partition, the broker's LogAppendTime — verified,
and set on a topic that lacks it — a week's retention), which every machine reaches; without
one, a file in the state directory. Who holds the lock is decided by reading the log in order
(`replay`), by the log's own times only: a claim takes a free lock, or one whose holder's
lease ran out (no beat for `lease` by the log's clock), or one whose holder's process is
proven gone (`_gone`); any other claim loses and waits. The holder beats while it holds, and
releases at the end. A holder whose beats stop reaching the log counts its lease as lost before
any other could take it over (`Hold.check`), and from then on changes no shared connector
(kafka/connect_rest.py `guarded`).

Liveness is the lease's. A pid proves nothing across machines (two bastions both named
`bastion`), containers (`--network host`; pid 1 in each) or boots, so a holder's process
counts as gone only where this machine can prove it: the claim records its boot
(/proc/sys/kernel/random/boot_id), pid namespace (/proc/self/ns/pid) and start time
(/proc/PID/stat); with the same boot and namespace, no process with its pid, or one started
at another time, is proof. Anything else waits for the lease.

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
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import KafkaException, Producer

from drctl.errors import CheckFailed, ExitStatus, Unreachable
from drctl.kafka.clients import ClusterClients, reason_text
from drctl.kafka.connect_rest import LockNotHeld, guarded
from drctl.kafka.records import ReadTimeout, read_all
from drctl.kafka.topics import (
    CONFIG_SHOWS_S,
    ensure_topics,
    log_append_time_topics,
    set_topic_config,
)

LEASE_S = 60.0  # a holder silent this long has died (or is stuck): another may take over
BEAT_S = 10.0
WAIT_S = 900.0  # how long a step waits for the lock held by a live command
POLL_S = 2.0
# A holder counts its lease as lost this far into it without a beat the log confirmed: before
# any other claim can take it over, with room for a change already on its way.
SAFE_SHARE = 5 / 6
LOCK_TOPIC_CONFIG = {"cleanup.policy": "delete", "retention.ms": str(7 * 24 * 3600 * 1000),
                     "message.timestamp.type": "LogAppendTime"}


@dataclass(frozen=True)
class LockRecord:
    op: str  # claim | beat | release
    holder: str  # a fresh id per hold
    who: str  # the command holding it, in words
    host: str  # in words only: host names prove nothing (two bastions named `bastion`)
    pid: int
    lease_ms: int
    # Connectors stopped for a moment and not yet resumed: the next holder resumes them.
    journal: tuple[str, ...] = ()
    takes_over: str | None = None  # a claim over a holder whose process is proven gone
    at_ms: int = 0  # the log's time of the record (set when it is read back)
    # `<boot id>/<pid namespace>/<start time>` of the holder's process (Linux), which proves
    # whether it still runs to a process of the same boot and pid namespace (`_gone`).
    process: str | None = None

    def to_json(self) -> bytes:
        raw = asdict(self)
        raw.pop("at_ms")
        return json.dumps(raw, sort_keys=True).encode()

    @classmethod
    def from_json(cls, value: bytes, at_ms: int) -> LockRecord:
        """A record as the log holds it. Fields a later drctl added are left out (a newer
        holder's records must not stop an older drctl); one without the fields a lock needs is
        LockUnreadable."""
        try:
            raw = json.loads(value)
            known = {k: v for k, v in raw.items() if k in _RECORD_FIELDS}
            return cls(**{**known, "journal": tuple(known.get("journal") or ()),
                          "at_ms": at_ms})
        except (ValueError, TypeError, AttributeError) as exc:
            raise LockUnreadable(f"A record of the flow's lock cannot be read ({exc}): "
                                 f"{value[:200]!r}.",
                                 "Is a drctl of another kind writing to the lock's topic? "
                                 "Run the same drctl version on every machine.") from exc

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.at_ms / 1000, UTC).strftime("%H:%M:%S UTC")
        return f"{self.who} on {self.host} (pid {self.pid}, since {since})"


_RECORD_FIELDS = frozenset(f.name for f in fields(LockRecord)) - {"at_ms"}


class LockUnreadable(CheckFailed):
    """A record in the lock's log that is not a lock record drctl can read."""


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

    def __init__(self, cluster: ClusterClients, topic: str, key: str,
                 notify: Callable[[str], None] = lambda _: None) -> None:
        self.cluster, self.topic, self.key = cluster, topic, key.encode()
        self.name = f"{cluster.name}:{topic}"
        self.notify = notify
        self._producer: Producer | None = None
        self._write = threading.Lock()  # the holder's beats and its steps write alike
        self._ready = False

    def _prepare(self) -> None:
        """The topic exists, and its broker stamps every record (LogAppendTime). With
        CreateTime each record would carry its writer's clock, and a lease would compare two
        machines' clocks: a topic made by someone else, or by a tool that left the setting
        out, is set to LogAppendTime, or refused when it cannot be."""
        if self._ready:
            return
        admin = self.cluster.admin()
        try:
            ensure_topics(self.cluster, {self.topic: 1}, LOCK_TOPIC_CONFIG)
            stamped = self.topic in log_append_time_topics(admin, [self.topic])
        except KafkaException as exc:
            raise self._unreachable("prepare", exc) from exc
        if not stamped:
            try:
                stamped = set_topic_config(admin, self.topic,
                                           {"message.timestamp.type": "LogAppendTime"})
                cause = f"the setting did not show within {CONFIG_SHOWS_S:g} s"
            except KafkaException as exc:
                cause = reason_text(exc)
            if not stamped:
                raise CheckFailed(
                    f"The flow's lock topic {self.topic} on '{self.cluster.name}' stamps its "
                    "records with the writers' clocks (message.timestamp.type is not "
                    f"LogAppendTime), and drctl could not change it: {cause}. Its leases "
                    "would compare two machines' clocks.",
                    f"Set it (kafka-configs.sh --bootstrap-server {self.cluster.bootstrap} "
                    f"--alter --entity-type topics --entity-name {self.topic} --add-config "
                    "message.timestamp.type=LogAppendTime), or let drctl's principal alter "
                    "its configs; then run the command again.")
            self.notify(f"The flow's lock topic {self.topic} on '{self.cluster.name}' "
                        "stamped its records with the writers' clocks: set it to the "
                        "broker's (message.timestamp.type=LogAppendTime)")
        self._ready = True

    def _unreachable(self, what: str, exc: BaseException) -> Unreachable:
        return Unreachable(f"Could not {what} the flow's lock in {self.topic} on "
                           f"'{self.cluster.name}': {exc}.",
                           f"Check that '{self.cluster.name}' answers, then run the "
                           "command again.")

    def append(self, record: LockRecord) -> None:
        failed: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(str(err))

        with self._write:
            self._prepare()
            if self._producer is None:
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
        with self._write:
            self._prepare()
        try:
            records = read_all(self.cluster, self.topic, timeout_s=30)
        except (KafkaException, ReadTimeout) as exc:
            raise self._unreachable("read", exc) from exc
        return [LockRecord.from_json(r.value, r.timestamp_ms) for r in records
                if r.key == self.key and r.value is not None]


class FlowBusy(CheckFailed):
    """Another command held the flow's lock for longer than a step waits."""


@cache
def _this_boot_and_namespace() -> str | None:
    """This machine's boot and this process's pid namespace (Linux), within which a pid
    names one process; None where they cannot be read."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink("/proc/self/ns/pid")  # pid:[4026531836]
    except OSError:
        return None
    return f"{boot}/{namespace}" if boot and namespace else None


def _start_time(pid: int) -> str | None:
    """When process `pid` started (clock ticks after boot: /proc/PID/stat's 22nd field, after
    the command name, which may hold spaces and parentheses); None when unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = stat.rpartition(")")[2].split()
    return rest[19] if len(rest) > 19 else None


def _this_process() -> str | None:
    """This process as a claim records it (`LockRecord.process`)."""
    where, started = _this_boot_and_namespace(), _start_time(os.getpid())
    return f"{where}/{started}" if where and started else None


def _gone(owner: LockRecord) -> bool:
    """Whether the owner's process is proven to have ended, so that its lease need not be
    waited out: one of this process's claims that no step holds any more (its release was
    lost), or — in the same boot and pid namespace — no process with its pid, or one that
    started at another time (the pid was reused). A host name or a bare pid proves nothing:
    anything unproven is the lease's to decide."""
    if owner.holder in _MINE:
        return owner.holder not in _LIVE
    here = _this_boot_and_namespace()
    if here is None or not owner.process:
        return False
    where, _, started = owner.process.rpartition("/")
    if where != here:
        return False
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # another user's process: it exists
    now = _start_time(owner.pid)
    return now is not None and now != started


class _LogClock:
    """The log's time now, at least: the newest record's time seen plus how long ago it was
    read (this machine's monotonic clock measures durations only). Leases are judged on the
    log's clock alone, never against this machine's wall clock."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._at_ms: int | None = None
        self._read = 0.0

    def saw(self, records: Sequence[LockRecord]) -> None:
        if records:
            newest = max(r.at_ms for r in records)
            if self._at_ms is None or newest > self.now_ms():
                self._at_ms, self._read = newest, self._clock()

    def now_ms(self) -> float:
        if self._at_ms is None:
            return float("-inf")
        return self._at_ms + (self._clock() - self._read) * 1000


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
    # Until when (the lock's monotonic clock) the hold is surely this one's: its last beat
    # the log confirmed, sent then, plus SAFE_SHARE of its lease.
    valid_until: float = 0.0
    failure: str | None = None  # why the last beat did not reach the log
    _depth: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _said: bool = False

    def write(self, op: str, journal: Sequence[str]) -> None:
        self.journal = tuple(journal)
        self.lock.log.append(replace(self.claim, op=op, journal=self.journal,
                                     takes_over=None))

    def confirmed(self, sent: float) -> None:
        """A beat sent at `sent` is in the log, and the log still names this hold."""
        self.valid_until = max(self.valid_until,
                               sent + self.claim.lease_ms / 1000 * SAFE_SHARE)

    def check(self) -> None:
        """Refuse to go on when another command took the lock over, or when the lease may
        have run out unseen (no beat reached the log for most of it: cut off from the log's
        cluster): another command may take it over any moment."""
        if self.lost_to is not None:
            raise LockNotHeld(
                f"The flow's lock was taken over by {self.lost_to.describe()} while this "
                "command held it: it stops before changing anything more.",
                "Let that command finish, then run this one again.",
                ExitStatus.CHECK_FAILED, transient=False)
        if self.lock.clock() > self.valid_until:
            lease_s = self.claim.lease_ms / 1000
            raise LockNotHeld(
                f"This command's hold on the flow's lock ({self.lock.log.name}) could not be "
                f"renewed for {lease_s * SAFE_SHARE:.0f} s of its {lease_s:.0f} s lease"
                + (f" ({self.failure})" if self.failure else "")
                + ": another command may take the lock over, so this one stops before "
                "changing anything more.",
                "Check that the lock's cluster answers, then run the command again: it "
                "continues after the last step recorded.",
                ExitStatus.UNREACHABLE, transient=True)

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
    """The lock of one flow (`key`) in `log`. `clock`: a monotonic clock (durations only)."""

    def __init__(self, log: LockLog, key: str, who: str, *, lease_s: float = LEASE_S,
                 wait_s: float = WAIT_S, notify: Callable[[str], None] = lambda _: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.log, self.key, self.who = log, key, who
        self.lease_s, self.wait_s, self.notify = lease_s, wait_s, notify
        self.clock = clock

    def _record(self, holder: str, takes_over: str | None = None) -> LockRecord:
        return LockRecord("claim", holder, self.who, socket.gethostname(), os.getpid(),
                          int(self.lease_s * 1000), takes_over=takes_over,
                          process=_this_process())

    def acquire(self) -> Hold:
        """Claim the lock: at once when it is free, its holder's process is proven gone, or
        its lease ran out by the log's clock; else wait (`wait_s`), saying who holds it. The
        first claim is made whatever the log says: it costs one record, and its time is the
        log's time now, from which the wait for a lease is measured."""
        holder = secrets.token_hex(8)
        _MINE.add(holder)
        started = self.clock()
        say_at = 0.0
        log_time = _LogClock(self.clock)
        probed = False
        while True:
            records = self.log.read()
            log_time.saw(records)
            state = replay(records)
            owner = state.owner
            gone = owner is not None and _gone(owner)
            lapsed = owner is not None and log_time.now_ms() > state.last_ms + owner.lease_ms
            if owner is None or gone or lapsed or not probed:
                probed = True
                sent = self.clock()
                _LIVE.add(holder)
                self.log.append(self._record(holder, owner.holder if gone and owner else None))
                records = self.log.read()
                log_time.saw(records)
                state = replay(records)
                if state.owner is not None and state.owner.holder == holder:
                    hold = Hold(self, state.owner, state.journal, state.taken_from,
                                state.journal)
                    hold.confirmed(sent)
                    if state.taken_from is not None:
                        why = ("its process is gone" if state.owner.takes_over else
                               f"it beat no more within its lease of "
                               f"{state.taken_from.lease_ms / 1000:.0f} s")
                        self.notify(f"Took the flow's lock over from "
                                    f"{state.taken_from.describe()}: {why}")
                    return hold
                _LIVE.discard(holder)
                owner = state.owner
            waited = self.clock() - started
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
        """Beat while the step holds the lock; each beat read back: a log that names another
        holder is a lock lost, and beats that stop reaching the log run the hold's lease out
        (`Hold.check` refuses from then on)."""
        while not hold._stop.wait(min(BEAT_S, self.lease_s / 3)):
            sent = self.clock()
            try:
                hold.write("beat", hold.journal)
                owner = replay(self.log.read()).owner
            except Exception as exc:  # noqa: BLE001 - a missed beat is retried; the lease decides
                hold.failure = getattr(exc, "message", None) or str(exc) or type(exc).__name__
                if self.clock() > hold.valid_until and not hold._said:
                    hold._said = True
                    self.notify(f"Could not renew the flow's lock ({self.log.name}) for most "
                                f"of its lease: this command changes no shared connector "
                                f"any more ({hold.failure})")
                continue
            if owner is None or owner.holder != hold.claim.holder:
                hold.lost_to = owner or hold.claim
                if owner is not None:
                    self.notify(f"The flow's lock was taken over by {owner.describe()}: this "
                                "command changes no shared connector any more")
                return
            hold.failure = None
            hold.confirmed(sent)

    @contextmanager
    def held(self) -> Iterator[Hold]:
        """The lock for the block inside; reentrant within one thread. Every connector change
        in it checks the hold first (`Hold.check`)."""
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
            with guarded(hold.check):
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
# log (`_MINE`) is one whose release was lost.
_LIVE: set[str] = set()
_MINE: set[str] = set()


def lock_topic(state_topic: str) -> str:
    """The lock's topic beside the state topic."""
    return f"{state_topic}.lock"
