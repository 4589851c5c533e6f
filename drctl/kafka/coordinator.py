"""Group-coordinator requests, sent by librdkafka in a child process of their own.

librdkafka 2.16's admin client kills the process it runs in on answers a broker gives while it
restarts or moves a coordinator: an OffsetFetch answered NOT_COORDINATOR, COORDINATOR_NOT_-
AVAILABLE, LEADER_NOT_AVAILABLE, NOT_LEADER, BROKER_NOT_AVAILABLE, REPLICA_NOT_AVAILABLE or
KAFKA_STORAGE_ERROR is a SIGSEGV (librdkafka#5040), and a DescribeConsumerGroups or
ListConsumerGroupOffsets send that fails on a dropped connection can abort (librdkafka
PR #5397). So drctl's own process never sends those requests: one child per cluster holds the
admin clients that do (ListGroups, DescribeGroups, OffsetFetch, OffsetCommit, DeleteGroups),
built from the cluster's configuration, which it reads from its stdin (never argv, the
environment or a log). A request names many groups; the child keeps windows of them in
flight and sends the answers back a window at a time, so the parent works on the first while
the child waits for the next.

A child that dies is one error, `CoordinatorDied`, which the caller retries (it is transient,
drctl/kafka/retriable.py); the next request starts another child. The child ends when its
stdin closes, so it never outlives drctl, even one killed with SIGKILL; whoever made the
`Coordinator` closes it when its command ends (kafka/clients.py `ClusterClients.close`).
It runs in a process group of its own, which is what a stuck child's kill ends: a grandchild
(kinit) holding its stdout goes with it. It imports the drctl this process runs, never a
module of the working directory (`_command`).

Only drctl/kafka/groups.py sends requests through this module: what the answers mean, and
how long a failure is retried, is decided there.
"""

from __future__ import annotations

import collections
import math
import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from drctl.kafka.inflight import windows

# An operation's items and its answers: (key, value) or (key, Failure) per item.
Outcome = tuple[Any, Any]

# Admin clients (connections to each coordinator) per child. A broker serves one request
# per connection at a time; two connections let it serve two.
CONNECTIONS = 2

_HEADER = struct.Struct(">I")
# How much longer than a request's own timeout the child may stay silent while it owes an
# answer before the parent takes it for stuck and kills it (a caller's deadline may end the
# wait sooner: the request then ends unanswered, and the silence keeps counting).
_STUCK_AFTER_S = 30.0
# How long a killed or closed child is waited for: never unbounded (a grandchild holding its
# stdout keeps the pipe open after it died).
_DEATH_WAIT_S = 5.0

# The child's start. `python -m` puts the working directory first on the path: a `queue.py`
# or a `drctl/` there would run with the operator's rights and read the cluster's properties
# (sasl.password) from stdin. -P leaves it off; the directory this drctl was imported from
# goes first only when the child's path lacks it (a checkout run as `python -m drctl` from
# its own directory, which this process trusts already). Not -I: it also drops PYTHONPATH
# and the user's site-packages, where drctl itself may be installed.
_ROOT = str(Path(__file__).resolve().parents[2])
_BOOT = ("import sys\n"
         "root = sys.argv[1]\n"
         "if root not in sys.path: sys.path.insert(0, root)\n"
         "from drctl.kafka.coordinator import _serve\n"
         "_serve()\n")


def _command() -> list[str]:
    return [sys.executable, "-P", "-c", _BOOT, _ROOT]


@dataclass(frozen=True)
class Failure:
    """A request's error for one item: librdkafka's code and text (picklable, unlike
    KafkaError)."""

    code: int
    text: str


class CoordinatorDied(Exception):
    """The child process stopped before it answered: librdkafka crashed on an answer (a
    signal), or the child could not start. Transient: the next request starts another."""

    transient = True

    def __init__(self, cluster: str, status: int | None, stderr: str, *,
                 hung: bool = False) -> None:
        self.cluster = cluster
        self.status = status
        self.signal = -status if status is not None and status < 0 else None
        self.detail = stderr
        self.hung = hung  # it stopped answering, and drctl stopped it
        super().__init__(self.describe())

    def describe(self) -> str:
        if self.hung:
            return "the Kafka client for the group coordinators stopped answering"
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            return ("the Kafka client stopped on an error answer from the group coordinator "
                    f"({name}; librdkafka#5040)")
        return f"the Kafka client for the group coordinators stopped (exit {self.status})"


class CoordinatorRejected(Exception):
    """librdkafka refused to build the child's admin client from the configuration."""


def _write(stream: IO[bytes], message: object, lock: threading.Lock) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    with lock:
        stream.write(_HEADER.pack(len(data)) + data)
        stream.flush()


def _read(stream: IO[bytes]) -> Any:
    """The next message, or None at the end of the stream."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    size = _HEADER.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


# -- the parent's side -----------------------------------------------------------------------


class Coordinator:
    """The child process of one cluster, started on the first request and after one died.
    Requests may come from several threads at once."""

    def __init__(self, cluster: str, properties: Mapping[str, str], *,
                 on_wire: Callable[[int, str], None] = lambda code, text: None,
                 on_stats: Callable[[str], None] | None = None,
                 connections: int = CONNECTIONS) -> None:
        self.cluster = cluster
        self._properties = dict(properties)
        self._on_wire = on_wire
        self._on_stats = on_stats
        self._connections = connections
        self._lock = threading.Lock()  # starting and stopping the child
        self._write_lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        # request id -> the child it went to and where its answers go
        self._pending: dict[int, tuple[subprocess.Popen[bytes], queue.SimpleQueue[Any]]] = {}
        self._next_id = 0
        self._stderr: collections.deque[str] = collections.deque(maxlen=30)
        self.started = 0  # how many children were started (tests count the restarts)
        self._hung: set[int] = set()  # children drctl killed because they stopped answering
        # child pid -> since when it owes an answer and said nothing. A request given up at
        # its caller's deadline leaves it counting: a stuck child is found out, and killed,
        # over several short requests too.
        self._owed: dict[int, float] = {}
        # child pid -> when it said it was ready (its admin clients built). Its start-up is
        # drctl's own cost, not the cluster's silence: a caller's deadline counts from then.
        self._ready: dict[int, float] = {}

    def start(self) -> None:
        """Start the child now, if none runs (a request starts it otherwise): its start-up,
        importing the Kafka client, may overlap other work."""
        with self._lock:
            self._running()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = self._start()
        return self._proc

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            _command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if k != "DRCTL_REQUEST_COUNT"},
            process_group=0)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self.started += 1
        self._stderr.clear()
        _write(proc.stdin, {"properties": self._properties, "connections": self._connections,
                            "stats": self._on_stats is not None}, self._write_lock)
        threading.Thread(target=self._answers, args=(proc,), daemon=True,
                         name=f"drctl-coordinator-{self.cluster}").start()
        threading.Thread(target=self._keep_stderr, args=(proc,), daemon=True,
                         name=f"drctl-coordinator-log-{self.cluster}").start()
        return proc

    def _keep_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self._stderr.append(line.decode(errors="replace").rstrip())

    def _answers(self, proc: subprocess.Popen[bytes]) -> None:
        """Hand each answer to the request waiting for it; at the child's end, tell every
        waiting request that it died."""
        assert proc.stdout is not None
        while True:
            message = _read(proc.stdout)
            if message is None:
                break
            with self._lock:
                if any(child is proc for child, _ in self._pending.values()):
                    self._owed[proc.pid] = time.monotonic()  # it spoke: silent from now
                else:
                    self._owed.pop(proc.pid, None)
            kind = message[0]
            if kind == "ready":
                with self._lock:
                    self._ready[proc.pid] = time.monotonic()
                    for child, waiting in self._pending.values():
                        if child is proc:
                            waiting.put(("ready", None, None))  # its deadline counts now
            elif kind == "wire":
                self._on_wire(message[1], message[2])
            elif kind == "stats":
                if self._on_stats is not None:
                    self._on_stats(message[1])
            else:
                with self._lock:
                    found = self._pending.get(message[1])
                if found is not None:
                    found[1].put(message)
        status = proc.wait()
        with self._lock:
            if self._proc is proc:
                self._proc = None
            self._owed.pop(proc.pid, None)
            self._ready.pop(proc.pid, None)
            died = ("died", None, status)
            for child, waiting in self._pending.values():
                if child is proc:
                    waiting.put(died)

    def request(self, op: str, items: Sequence[Any], timeout_s: float,
                give_up_at: Callable[[], float] | None = None) -> Iterator[list[Outcome]]:
        """Send `op` for `items`; yield the answers a window at a time. CoordinatorDied when
        the child stops first (the answers yielded before it stand). `give_up_at`: when the
        caller stops waiting (time.monotonic(), asked before each wait), later by as long as
        the child took to start during the request; what is unanswered then is answered
        "timed out" here, and the child, which may still be waiting for a broker, is left to
        finish (its late answers go nowhere)."""
        answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
        with self._lock:
            proc = self._running()
            request_id = self._next_id
            self._next_id += 1
            self._pending[request_id] = (proc, answers)
            self._owed.setdefault(proc.pid, time.monotonic())
        sent = time.monotonic()
        unanswered = dict.fromkeys(_key(op, item) for item in items)

        def caller_end() -> float:
            with self._lock:
                ready = self._ready.get(proc.pid)
            if give_up_at is None or ready is None:
                return math.inf  # not started yet: only its silence (stuck_at) ends the wait
            return give_up_at() + max(0.0, ready - sent)
        try:
            try:
                assert proc.stdin is not None
                _write(proc.stdin, ("request", request_id, op, list(items), timeout_s),
                       self._write_lock)
            except (BrokenPipeError, OSError):
                pass  # the child is gone: its reader says so
            while True:
                # The child answers every window within its timeout (kafka/groups.py): one
                # silent much longer is stuck, not waiting for a broker.
                with self._lock:
                    stuck_at = self._owed.get(proc.pid, time.monotonic()) + timeout_s \
                        + _STUCK_AFTER_S
                end = min(stuck_at, caller_end())
                try:
                    message = answers.get(timeout=max(0.0, end - time.monotonic()))
                except queue.Empty:
                    if time.monotonic() < stuck_at:
                        if time.monotonic() >= caller_end():
                            yield [(k, Failure(_timeout_code(), "no answer before the "
                                               "deadline")) for k in unanswered]
                            return
                        continue
                    message = self._kill(proc, answers)
                kind, _, payload = message
                if kind == "ready":
                    continue
                if kind == "part":
                    for k, _ in payload:
                        unanswered.pop(k, None)
                    yield payload
                elif kind == "done":
                    return
                elif kind == "rejected":
                    raise CoordinatorRejected(payload)
                else:  # died
                    raise CoordinatorDied(self.cluster, payload, "\n".join(self._stderr),
                                          hung=proc.pid in self._hung)
        finally:
            with self._lock:
                self._pending.pop(request_id, None)

    def _kill(self, proc: subprocess.Popen[bytes], answers: queue.SimpleQueue[Any]) -> Any:
        """Kill a stuck child with its process group; its reader's "died", or the same
        when the reader cannot tell within _DEATH_WAIT_S (the pipe held open)."""
        self._hung.add(proc.pid)
        _kill_group(proc)
        try:
            return answers.get(timeout=_DEATH_WAIT_S)
        except queue.Empty:
            return ("died", None, proc.poll())

    def close(self) -> None:
        """Stop the child: its stdin closes, it exits (killed, with its process group,
        when it does not). Waits a bounded time."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(_DEATH_WAIT_S)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                proc.wait(_DEATH_WAIT_S)
            except subprocess.TimeoutExpired:
                pass  # unkillable (in the kernel): not waited for longer

    @property
    def pid(self) -> int | None:
        """The running child's process id (None: none running)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()  # the group is gone (or was never its own): the child alone
    except OSError:
        pass


class InProcess(Coordinator):
    """The child's work done in this process on the admin clients given: the tests' fakes,
    which cannot crash. Never for a real cluster."""

    def __init__(self, *admins: Any) -> None:
        super().__init__("in-process", {})
        self._admins = admins

    def request(self, op: str, items: Sequence[Any], timeout_s: float,
                give_up_at: Callable[[], float] | None = None) -> Iterator[list[Outcome]]:
        yield from _Served(self._admins, op, items, timeout_s).parts()


# -- the child's side ------------------------------------------------------------------------


def _kafka_failure(exc: BaseException) -> Failure:
    from confluent_kafka import KafkaError

    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        return Failure(err.code(), err.str())
    if isinstance(exc, TimeoutError):
        return Failure(KafkaError._TIMED_OUT, "no answer in time")
    return Failure(KafkaError._FAIL, f"{type(exc).__name__}: {exc}")


def _timed_out(failure: Failure) -> bool:
    from confluent_kafka import KafkaError

    return failure.code == KafkaError._TIMED_OUT


class _Served:
    """What the child does with one request: the admin calls of its operation, a window of
    items at a time on each admin client."""

    def __init__(self, admins: Sequence[Any], op: str, items: Sequence[Any],
                 timeout_s: float) -> None:
        self.admins = admins
        self.op = op
        self.items = items
        self.timeout_s = timeout_s

    def parts(self) -> Iterator[list[Outcome]]:
        if self.op == "list":
            yield [(None, self._list())]
            return
        senders: dict[str, Callable[[Any, Sequence[Any]], list[Outcome]]] = {
            "offsets": self._offsets, "describe": self._describe, "commit": self._commit,
            "delete": self._delete}
        send = senders[self.op]
        slices = list(windows(self.items))
        # Each admin client works through every len(admins)-th window; the answers come back
        # in the order they are ready.
        ready: queue.SimpleQueue[list[Outcome] | None] = queue.SimpleQueue()
        stop = threading.Event()

        def work(lane: int) -> None:
            # Every window is answered, whatever happens to it: a lane that stopped on one
            # item would leave the request unanswered until the parent took the child for
            # stuck — every command asking this cluster would then end exit 4.
            try:
                for window in slices[lane::len(self.admins)]:
                    if stop.is_set():
                        ready.put([(key, Failure(_timeout_code(),
                                                 "not sent: the coordinator left earlier "
                                                 "requests unanswered")) for key in
                                   (_key(self.op, item) for item in window)])
                        continue
                    try:
                        answered = send(self.admins[lane], window)
                    except Exception as exc:  # noqa: BLE001 - the window's answer
                        answered = [(_key(self.op, item), _kafka_failure(exc))
                                    for item in window]
                    if any(isinstance(v, Failure) and _timed_out(v) for _, v in answered):
                        stop.set()  # the next window would only wait as long again
                    ready.put(answered)
            finally:
                ready.put(None)

        lanes = min(len(self.admins), len(slices))
        for lane in range(lanes):
            threading.Thread(target=work, args=(lane,), daemon=True).start()
        finished = 0
        while finished < lanes:
            part = ready.get()
            if part is None:
                finished += 1
            else:
                yield part

    def _wait(self, futures: Mapping[Any, Future[Any]],
              answer: Callable[[Any], Any]) -> list[Outcome]:
        wait_futures(list(futures.values()), timeout=self.timeout_s + 1)
        out: list[Outcome] = []
        for key, future in futures.items():
            try:
                out.append((key, answer(future.result(timeout=0))))
            except Exception as exc:  # noqa: BLE001 - every error is the item's answer
                out.append((key, _kafka_failure(exc)))
        return out

    def _list(self) -> list[str] | Failure:
        admin = self.admins[0]
        try:
            result = admin.list_consumer_groups(request_timeout=self.timeout_s).result(
                timeout=self.timeout_s + 1)
        except Exception as exc:  # noqa: BLE001
            return _kafka_failure(exc)
        if result.errors:
            # The groups of a broker that failed are missing: not "no group there".
            return _kafka_failure(_as_exception(result.errors[0]))
        return sorted(g.group_id for g in result.valid)

    def _offsets(self, admin: Any, groups: Sequence[str]) -> list[Outcome]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        futures, refused = _each(groups, lambda group: admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s))

        def offsets(result: Any) -> dict[tuple[str, int], int] | Failure:
            out = {}
            for tp in result.topic_partitions or []:
                if tp.error is not None:
                    return _kafka_failure(_as_exception(tp.error))
                if tp.offset >= 0:
                    out[(tp.topic, tp.partition)] = tp.offset
            return out

        return refused + self._wait(futures, offsets)

    def _describe(self, admin: Any, groups: Sequence[str]) -> list[Outcome]:
        futures, refused = _batch(groups, lambda some: admin.describe_consumer_groups(
            list(some), request_timeout=self.timeout_s))
        return refused + self._wait(futures, lambda desc: (
            getattr(desc.state, "name", str(desc.state)), len(desc.members or [])))

    def _commit(self, admin: Any, commits: Sequence[tuple[str, list[tuple[str, int, int]]]]
                ) -> list[Outcome]:
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        offsets_of = dict(commits)
        futures, refused = _each(list(offsets_of), lambda group: (
            admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                group, [TopicPartition(t, p, o) for t, p, o in offsets_of[group]])],
                request_timeout=self.timeout_s)))

        def committed(result: Any) -> None | Failure:
            for tp in result.topic_partitions or []:
                if tp.error is not None:
                    return _kafka_failure(_as_exception(tp.error))
            return None

        return refused + self._wait(futures, committed)

    def _delete(self, admin: Any, groups: Sequence[str]) -> list[Outcome]:
        futures, refused = _batch(groups, lambda some: admin.delete_consumer_groups(
            list(some), request_timeout=self.timeout_s))
        return refused + self._wait(futures, lambda _: None)


def _refusal(exc: BaseException) -> Failure:
    """An item the client refused before sending anything (confluent-kafka raises at once on
    a group named "", which Kafka keeps for old consumers): that item's permanent failure,
    not the request's."""
    from confluent_kafka import KafkaError

    return Failure(KafkaError._INVALID_ARG, f"not sent, the client refused it: "
                                            f"{type(exc).__name__}: {exc}")


def _each(groups: Sequence[str], send: Callable[[str], Mapping[str, Future[Any]]]
          ) -> tuple[dict[str, Future[Any]], list[Outcome]]:
    """One call per group: its futures, and the groups the client refused at once."""
    futures: dict[str, Future[Any]] = {}
    refused: list[Outcome] = []
    for group in groups:
        try:
            futures.update(send(group))
        except Exception as exc:  # noqa: BLE001 - that group's answer
            refused.append((group, _refusal(exc)))
    return futures, refused


def _batch(groups: Sequence[str], send: Callable[[Sequence[str]], Mapping[str, Future[Any]]]
           ) -> tuple[dict[str, Future[Any]], list[Outcome]]:
    """One call for all the groups; one per group when the client refuses the batch at once,
    so that only the groups it refuses fail."""
    try:
        return dict(send(groups)), []
    except Exception:  # noqa: BLE001 - which group it was is found one by one
        return _each(groups, lambda group: send([group]))


def _key(op: str, item: Any) -> Any:
    return item[0] if op == "commit" else item


def _timeout_code() -> int:
    from confluent_kafka import KafkaError

    return KafkaError._TIMED_OUT


def _as_exception(err: Any) -> BaseException:
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(err, BaseException):
        return err
    return KafkaException(err) if isinstance(err, KafkaError) else Exception(str(err))


class _Admins:
    """The child's admin clients. A set that lost its brokers since it was made is replaced
    before the next request: librdkafka 2.16 can keep a broker it decommissioned on
    re-bootstrap as a group's coordinator, and every coordinator request on that client then
    waits out its timeout, however long the cluster has been back (librdkafka#5511)."""

    def __init__(self, properties: dict[str, Any], count: int,
                 on_error: Callable[[Any], None]) -> None:
        from confluent_kafka import KafkaError

        self._properties = properties
        self._count = count
        self._on_error = on_error
        self._lock = threading.Lock()
        self._lost = threading.Event()
        # What says the clients lost their brokers: a connection, a broker handle, no answer.
        self._lost_codes = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
                            KafkaError._DESTROY_BROKER, KafkaError._TIMED_OUT}
        self.current = self._build()

    def _error(self, err: Any) -> None:
        if err.code() in self._lost_codes:
            self._lost.set()
        self._on_error(err)

    def note(self, answers: Sequence[Outcome]) -> None:
        """A request's answers: one that failed on a lost connection, or got none in time,
        replaces the clients too (their error callback may not have been served yet)."""
        if any(isinstance(v, Failure) and v.code in self._lost_codes for _, v in answers):
            self._lost.set()

    def _build(self) -> list[Any]:
        from confluent_kafka.admin import AdminClient

        conf: dict[str, Any] = {**self._properties, "error_cb": self._error}
        return [AdminClient(conf) for _ in range(self._count)]

    def for_request(self) -> list[Any]:
        with self._lock:
            if self._lost.is_set():
                self._lost.clear()
                self.current = self._build()
            return self.current


def _serve() -> None:
    """The child: build the admin clients from the first message, then serve requests, each
    in a thread of its own, until stdin closes."""
    from confluent_kafka import KafkaException

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing but answers on the pipe
    lock = threading.Lock()
    hello = _read(stdin)
    if hello is None:
        return
    properties: dict[str, Any] = dict(hello["properties"])
    if hello["stats"]:
        properties["statistics.interval.ms"] = "100"
        properties["stats_cb"] = lambda stats: _write(stdout, ("stats", stats), lock)
    try:
        admins = _Admins(properties, hello["connections"], lambda err: _write(
            stdout, ("wire", err.code(), err.str()), lock))
    except KafkaException as exc:
        err = exc.args[0] if exc.args else exc
        text = err.str() if hasattr(err, "str") else str(err)
        while (message := _read(stdin)) is not None:
            _write(stdout, ("rejected", message[1], text), lock)
        return
    _write(stdout, ("ready",), lock)  # the parent's deadlines count from here

    def run(request_id: int, op: str, items: Sequence[Any], timeout_s: float) -> None:
        for part in _Served(admins.for_request(), op, items, timeout_s).parts():
            admins.note(part)
            _write(stdout, ("part", request_id, part), lock)
        _write(stdout, ("done", request_id, None), lock)

    def poll() -> None:  # serves the error and statistics callbacks
        while True:
            for admin in admins.current:
                admin.poll(0.2)

    threading.Thread(target=poll, daemon=True).start()
    while (message := _read(stdin)) is not None:
        _, request_id, op, items, timeout_s = message
        threading.Thread(target=run, args=(request_id, op, items, timeout_s),
                         daemon=True).start()
    # stdin closed: the parent is gone or done. Leave at once; librdkafka's threads with it.
    os._exit(0)


if __name__ == "__main__":
    # Through the module's own name: what the child pickles (Failure) must unpickle as
    # drctl.kafka.coordinator's in the parent, not __main__'s.
    from drctl.kafka.coordinator import _serve as serve

    serve()
