"""Shared fixtures. Lab-backed tests run against real Kafka brokers and a real MirrorMaker 2;
when the lab cannot start they fail (never skip)."""

from __future__ import annotations

import contextlib
import fcntl
import gc
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka.admin import AclBinding, AclBindingFilter

from drctl.config import load_config
from drctl.kafka.acls import grant
from drctl.kafka.checkpoints import read_checkpoints
from drctl.kafka.clients import ClusterClients
from drctl.kafka.groups import delete_groups, list_groups
from drctl.lab.lab import ACTIVE_ACTIVE, CONNECT_GROUP, ONE_WAY, Lab, LabPorts, LabState
from drctl.lab.registry import LabRegistries, registry_ports, registry_url
from drctl.lab.security import mm2_source_acls, mm2_target_acls
from drctl.lab.spark_connect import SparkConnectServer
from drctl.registry.client import RegistryClient
from drctl.replication.base import kind_for

# Helpers running test sessions side by side give each a different base.
# Below the ephemeral range (32768+), where a client socket could take a port first.
# pytest-xdist's workers (gw0, gw1, …) each run their own labs, 200 ports apart: the shared
# labs, the secure one, the registries and the Spark Connect server in the first hundred,
# the Kafka 3.9 labs and the other labs of a test file's own in the second.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_RUN_BASE = int(os.environ.get("DRCTL_TEST_PORT_BASE", "23100"))
PORT_BASE = _RUN_BASE + 200 * _WORKER
# The secure lab's: clear of the shared labs (+ 0, + 10, + 20, + 30);
# the second hundred holds the Kafka 3.9 labs (+ 100, + 110), test_legacy_keys.py's (+ 120)
# and test_drill_faults.py's (+ 130, + 140, + 150: its active-active lab), test_strimzi_lab.py's
# (+ 160 .. + 199); test_strimzi_cycle.py's at + 40 .. + 59.
SECURE_BASE = PORT_BASE + 70
# The schema registries' (primary + 0, secondary + 1), past the secure lab's.
REGISTRY_BASE = PORT_BASE + 80
# The run's one Spark Connect server, which every lab's gap jobs run on (spark.remote), each
# job in a session of its own: shared by the xdist workers, so one JVM starts and warms up
# instead of one per worker. The first worker to need it starts it (under a file lock); the
# run's controller stops it (`pytest_sessionfinish`).
SPARK_CONNECT_PORT = _RUN_BASE + 90
_SPARK_DIR = Path(tempfile.gettempdir()) / f"drctl-test-spark-connect-{_RUN_BASE}"
# This pytest run, set by its controller before the workers start (they inherit it): a run
# stops the server only if it used it — a unit-test run beside the suite stopped the suite's.
_RUN_ID = os.environ.setdefault("DRCTL_TEST_RUN_ID", uuid.uuid4().hex)
_SPARK_USED = _SPARK_DIR / f"used-by-{_RUN_ID}"


class RunningLab:
    """A started lab plus the clients tests need."""

    def __init__(self, lab: Lab, state: LabState) -> None:
        self.lab = lab
        self.state = state
        self.primary: ClusterClients = lab.clients(state, "primary")
        self.secondary: ClusterClients = lab.clients(state, "secondary")

    def close(self) -> None:
        """End the clients' group-request children (kafka/coordinator.py) with the lab."""
        self.primary.close()
        self.secondary.close()

    @property
    def config_file(self) -> Path:
        return self.lab.config_file

    @property
    def names_kept(self) -> bool:
        return self.state.names_kept

    def mirror(self, topic: str) -> str:
        return topic if self.names_kept else f"primary.{topic}"

    def wait_mirror_topic(self, topic: str, deadline_s: float = 60) -> None:
        """Until MirrorMaker 2 has created `topic`'s mirror on the secondary."""
        end = time.monotonic() + deadline_s
        while self.mirror(topic) not in self.secondary.admin().list_topics(timeout=10).topics:
            if time.monotonic() > end:
                raise AssertionError(f"{self.mirror(topic)} was not created in time")
            time.sleep(0.5)

    def wait_checkpointed(self, group: str, topic: str, offsets: dict[int, int],
                          deadline_s: float = 90) -> None:
        """Until MirrorMaker 2's checkpoints on the secondary carry `group`'s commits at
        `offsets` (per partition of `topic`). A failover with the source down moves only the
        groups it checkpointed, and it finds a new group at its next group refresh."""
        rep = load_config(self.config_file).require_replication()
        topic_of_checkpoints = kind_for(rep).checkpoints_topic(rep) or ""
        wanted = {(group, self.mirror(topic), p): o for p, o in offsets.items()}
        end = time.monotonic() + deadline_s
        while True:
            cps = read_checkpoints(self.secondary, topic_of_checkpoints)
            missing = sorted(k for k, o in wanted.items()
                             if k not in cps or cps[k].upstream_offset != o)
            if not missing:
                return
            if time.monotonic() > end:
                raise AssertionError(f"no checkpoint after {deadline_s} s for {missing}")
            time.sleep(0.5)


# Kafka 3.x is an estate drctl serves as it serves 4.x: the incident cycles also run on labs
# whose brokers, Connect and MirrorMaker 2 are Kafka 3.9's, one per naming, each started when
# a test first asks for it and shared by all such tests (`on_kafka_3`).
KAFKA_3 = "3.9.x"
KAFKA_3_LABS = ("kept-3.9", "prefixed-3.9")
# Every kind of lab a test may ask for by name, and its ports' offset from PORT_BASE
# (_lab_ports). A test file's own lab takes + 120 and up (test_legacy_keys.py + 120).
_LAB_OFFSETS = {"kept": 0, "prefixed": 10, "spark": 20, ACTIVE_ACTIVE: 30,
                KAFKA_3_LABS[0]: 100, KAFKA_3_LABS[1]: 110}

# The version x naming matrix. Per commit (`make test`) a cycle that runs on several labs
# runs on the two diagonal ones, Kafka 4.x with names kept and Kafka 3.9 with names prefixed:
# every version and every naming still meets every procedure. `make test-matrix`
# (`pytest --matrix`) runs every combination, and every repetition at its full count
# (`full_matrix`): before an issue that touches a procedure, the lab or the client layer is
# resolved.
DIAGONAL = ("kept", KAFKA_3_LABS[1])


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--matrix", action="store_true", default=False,
                     help="every Kafka version x naming combination and every repetition "
                          "at its full count (make test-matrix); without it, the diagonal "
                          "combinations and the per-commit counts")


def _combinations(names: tuple[str, ...]) -> list[object]:
    """`names` as parameters: those off the diagonal marked `matrix` (deselected per
    commit)."""
    return [name if name in DIAGONAL else pytest.param(name, marks=pytest.mark.matrix)
            for name in names]


def on_kafka_3(fixture: str = "lab") -> pytest.MarkDecorator:
    """Run a test on both Kafka 3.9 labs (names kept and prefixed) as well as where it ran:
    `lab` (Kafka 4.x, names kept) or `any_lab` (Kafka 4.x, both namings). Per commit only
    the diagonal ones (`DIAGONAL`): Kafka 4.x kept and Kafka 3.9 prefixed."""
    ran = ("kept",) if fixture == "lab" else ("kept", "prefixed")
    return pytest.mark.parametrize(fixture, _combinations((*ran, *KAFKA_3_LABS)),
                                   indirect=True)


def only_on_kafka_3(fixture: str = "lab") -> pytest.MarkDecorator:
    """Run a test on both Kafka 3.9 labs only: where the drill's fault rounds
    (tests/lab/test_drill_faults.py) and a Kafka 4.x test of the same moment already assert
    what it asserts on Kafka 4.x. Per commit on the prefixed one (`DIAGONAL`)."""
    return pytest.mark.parametrize(fixture, _combinations(KAFKA_3_LABS), indirect=True)


@pytest.fixture(scope="session")
def full_matrix(request: pytest.FixtureRequest) -> bool:
    """Whether this run is the full matrix (`--matrix`): a test that repeats what it proves
    (rounds of faults, restarts) runs its full count then, fewer per commit."""
    return bool(request.config.getoption("matrix"))


class _Labs:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: dict[str, RunningLab] = {}
        self.keep = bool(os.environ.get("DRCTL_KEEP_TEST_LABS"))
        self.spark = SparkConnectServer(_SPARK_DIR, SPARK_CONNECT_PORT)
        self._spark_up: threading.Thread | None = None
        self._spark_failed: BaseException | None = None
        # Labs going down in the background (`stop`), by name, and what their downs raised.
        self._stopping: dict[str, threading.Thread] = {}
        self._stop_failed: list[BaseException] = []

    def start_spark(self) -> None:
        """Start the worker's Spark Connect server, in the background: a lab starts
        meanwhile (`spark_remote` waits for it)."""
        if self._spark_up is not None:
            return

        def up() -> None:
            try:
                _SPARK_DIR.mkdir(parents=True, exist_ok=True)
                _SPARK_USED.touch()
                with open(_SPARK_DIR / "starting.lock", "w") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)  # one worker starts it, the others wait
                    self.spark.up()
            except BaseException as exc:  # noqa: BLE001 - raised in the test's thread
                self._spark_failed = exc

        self._spark_up = threading.Thread(target=up, name="spark-connect-up", daemon=True)
        self._spark_up.start()

    def spark_remote(self) -> str:
        """The worker's Spark Connect server, once it answers (a test fails, never skips,
        when it cannot start: its log is named)."""
        self.start_spark()
        assert self._spark_up is not None
        self._spark_up.join()
        if self._spark_failed is not None:
            self.keep = True
            raise self._spark_failed
        return self.spark.url

    def get(self, name: str, *, spark_workers: int = 0) -> RunningLab:
        if name not in self.started:
            self._stopped(name)  # the same kind started again: its ports and directory
            lab = Lab(self.root / f"lab-{name}")
            self.start_spark()
            try:
                state = lab.up(ports=_lab_ports(name),
                               kafka_version=KAFKA_3 if name in KAFKA_3_LABS else None,
                               names_kept=not name.startswith("prefixed")
                               and name != ACTIVE_ACTIVE,
                               spark_workers=spark_workers, secure=name == "secure",
                               spark_connect=self.spark.url,
                               topology=ACTIVE_ACTIVE if name == ACTIVE_ACTIVE else ONE_WAY,
                               # The active-active lab names copies as estates that feed
                               # metrics stores do (primary_orders): the default '.' is the
                               # active-active drill's (tests/lab/test_drill_faults.py).
                               separator="_" if name == ACTIVE_ACTIVE else None)
                self.spark_remote()  # up before any of the lab's gap jobs
            except BaseException:
                lab.down()
                self.keep = True  # its logs explain the failure
                print(f"\n{name} lab files kept in {lab.dir}")
                raise
            self.started[name] = RunningLab(lab, state)
        return self.started[name]

    def stop(self, name: str) -> None:
        """Down with a lab no test left on this worker needs: an idle lab still costs a
        tenth of a core (MirrorMaker 2 polling at test speed), which the others' tests want.
        It goes down in the background while the worker's next test runs, its JVMs killed
        unless a failure keeps its files (`Lab.down` discard): a Connect worker's shutdown
        takes 5-6 s (its readers' fetches wait up to 5 s, lab.py), and the session's last
        labs' shutdowns were the wait at every worker's end."""
        running = self.started.pop(name, None)
        if running is None:
            return
        running.close()  # the clients' children, by the thread that made them

        def down() -> None:
            try:
                # Its files go with it unless a failure keeps them (its logs then whole).
                running.lab.down(discard=not self.keep)
                if not self.keep:
                    shutil.rmtree(running.lab.dir, ignore_errors=True)
            except BaseException as exc:  # noqa: BLE001 - raised by the session's down()
                self._stop_failed.append(exc)

        self._stopped(name)
        stopping = threading.Thread(target=down, name=f"lab-down-{name}")
        stopping.start()
        self._stopping[name] = stopping

    def _stopped(self, name: str) -> None:
        """Until the lab `name` has gone down, if it is going down."""
        stopping = self._stopping.pop(name, None)
        if stopping is not None:
            stopping.join()

    def down(self) -> None:
        """Every lab down, side by side, and every down the workers started ended."""
        for name in list(self.started):
            self.stop(name)
        for name in list(self._stopping):
            self._stopped(name)
        if self._spark_up is not None:
            self._spark_up.join()  # the run's controller stops the server
        if self._stop_failed:
            raise self._stop_failed[0]


# The Strimzi lab's binaries and CRDs (drctl/lab/kube.py, strimzi_crds.py), built once per
# machine: a run that may start a Strimzi lab starts the build as it begins, so the other
# tests run beside it; the lab's fixture waits on the cache's lock. Owned by the controller.
_strimzi_build: subprocess.Popen[bytes] | None = None


def pytest_configure(config: pytest.Config) -> None:
    # CI cancels a run with SIGTERM to its process group: pytest's default is to die where it
    # stands, leaving every lab's JVMs running (they are sessions of their own). As Ctrl-C
    # instead, in the controller and in each worker: the session's teardown stops its labs.
    signal.signal(signal.SIGTERM, _terminated)


def _terminated(_signum: int, _frame: object) -> None:
    # A second SIGTERM does not cut the teardown short (a handler, not SIG_IGN, which the
    # processes a teardown starts would inherit).
    signal.signal(signal.SIGTERM, lambda *_: None)
    raise KeyboardInterrupt


def pytest_sessionstart(session: pytest.Session) -> None:
    global _strimzi_build
    config = session.config
    if (hasattr(config, "workerinput") or config.option.collectonly
            or not _may_run_strimzi_lab(config)):
        return  # a collection only (`make test` writes the tests' bytecode so) runs no lab
    from drctl.lab.kube import cached_binaries

    if cached_binaries() is not None:
        return  # the CRDs, if missing, take the fixture some 20 s
    log = Path(tempfile.gettempdir()) / f"drctl-strimzi-build-{os.getpid()}.log"
    with log.open("wb") as out:
        # At the lowest priority: it takes the CPU the tests leave (they wait on clusters
        # often), and is done long before the Strimzi lab's tests, last on their worker.
        _strimzi_build = subprocess.Popen(
            ["nice", "-n", "19", sys.executable, "-m", "tests.lab.strimzi_build"], stdout=out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            cwd=Path(__file__).parents[1])
    print(f"\nbuilding the Strimzi lab's API server in the background (log: {log})")


def _may_run_strimzi_lab(config: pytest.Config) -> bool:
    """Whether the run's arguments reach a test file of the Strimzi lab (not with
    `-m 'not lab'`): drctl's cycle on it per commit, the lab's own tests in the full matrix
    (`--matrix`)."""
    if "not lab" in (config.getoption("markexpr", "") or ""):
        return False
    files = ("cycle", "lab") if config.getoption("matrix") else ("cycle",)
    targets = [Path(__file__).parent / "lab" / f"test_strimzi_{n}.py" for n in files]
    for arg in config.args or [str(Path(__file__).parent)]:
        path = Path(arg.split("::")[0]).resolve()
        if any(path == target or path in target.parents for target in targets):
            return True
    return False


def _end_strimzi_build() -> None:
    """The background build ends with the run: waited for when done, stopped otherwise."""
    global _strimzi_build
    if _strimzi_build is None:
        return
    if _strimzi_build.poll() is None:
        os.killpg(_strimzi_build.pid, signal.SIGTERM)
        try:
            _strimzi_build.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(_strimzi_build.pid, signal.SIGKILL)
            _strimzi_build.wait()
    _strimzi_build = None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run's shared Spark Connect server stops once every worker is done (this is the
    controller, or a run without workers), and the Strimzi build started at its start."""
    if hasattr(session.config, "workerinput"):
        return
    _end_strimzi_build()
    if _TIMES is not None:
        _write_times(Path(_TIMES))
    if not _SPARK_USED.exists():
        return  # no test of this run asked for it
    # Killed when its files go too: its shutdown was the run's last wait.
    SparkConnectServer(_SPARK_DIR, SPARK_CONNECT_PORT).down(discard=exitstatus == 0)
    if exitstatus == 0:
        shutil.rmtree(_SPARK_DIR, ignore_errors=True)
    else:
        print(f"\nthe Spark Connect server's files kept in {_SPARK_DIR}")


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        stop_what_a_run_left(_RUN_ID)


def stop_what_a_run_left(run_id: str, grace_s: float = 20.0) -> list[int]:
    """The controller's last act (or a run without workers'): every process this run's
    workers started that still runs is stopped — a worker's teardown stops its labs, but a
    worker ended before its teardown did (xdist kills one 10 s after a SIGTERM'd run) leaves
    them running, and their JVMs are sessions of their own. Found by the run's id in their
    environment (`_RUN_ID`, inherited by every process a worker starts) among processes that
    started after this one: never the shell or make that started the run. SIGTERM, SIGKILL
    after `grace_s`; returns the processes found."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    mine = f"DRCTL_TEST_RUN_ID={run_id}".encode()

    def started(pid: str) -> int:  # clock ticks after boot
        return int((proc / pid / "stat").read_text().rsplit(")", 1)[1].split()[19])

    try:
        since = started(str(os.getpid()))
    except (OSError, IndexError, ValueError):
        return []
    left: list[int] = []
    for pid in (p for p in os.listdir(proc) if p.isdigit() and int(p) != os.getpid()):
        try:
            if started(pid) >= since and mine in (proc / pid / "environ").read_bytes().split(
                    b"\0"):
                left.append(int(pid))
        except (OSError, IndexError, ValueError):
            continue  # gone, or not ours to read
    if not left:
        return []
    print(f"\nstopping {len(left)} process(es) this run left running: {left}")
    running = list(left)
    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        for pid in running:
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
        end = time.monotonic() + wait_s
        while running and time.monotonic() < end:
            running = [pid for pid in running if _running(pid)]
            time.sleep(0.2)
        if not running:
            break
    return left


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


# Every test's time, per run: `make test` writes them here (DRCTL_TEST_TIMES) and prints the
# tail, the slowest last; the rows say which worker ran each and when, so a run's schedule
# (a worker idle at the end, a lab's group late) can be read back.
_TIMES = os.environ.get("DRCTL_TEST_TIMES")


@dataclass
class _Timed:
    seconds: float
    start: float
    stop: float
    worker: str
    outcome: str = "passed"


_times: dict[str, _Timed] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The controller (or a run without workers) sums each test's setup, call and
    teardown. In the process that ran it, a failed test keeps its labs' files (their logs
    explain the failure; the path is printed at the end)."""
    if report.failed and _session_labs is not None:
        _session_labs.keep = True
    if _TIMES is None:
        return
    worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "main")
    row = _times.setdefault(report.nodeid, _Timed(0.0, report.start, report.stop, worker))
    row.seconds += report.duration
    row.start, row.stop = min(row.start, report.start), max(row.stop, report.stop)
    if report.outcome != "passed" and row.outcome == "passed":
        row.outcome = report.outcome if report.when == "call" else f"{report.when}-error"


def _write_times(path: Path) -> None:
    """One line a test, slowest last: seconds, outcome, worker, start and end (seconds into
    the run), the test; then per worker its seconds of tests and when its last one ended."""
    if not _times:
        return
    began = min(r.start for r in _times.values())
    workers: dict[str, tuple[float, float]] = {}
    lines = []
    for nodeid, r in sorted(_times.items(), key=lambda kv: kv[1].seconds):
        busy, last = workers.get(r.worker, (0.0, 0.0))
        workers[r.worker] = (busy + r.seconds, max(last, r.stop - began))
        lines.append(f"{r.seconds:8.1f}  {r.outcome:<8} {r.worker:<5} {r.start - began:7.0f} "
                     f"{r.stop - began:7.0f}  {nodeid}\n")
    lines += [f"# {w}: {busy:.0f} s of tests, its last ended {last:.0f} s into the run\n"
              for w, (busy, last) in sorted(workers.items())]
    path.write_text("".join(lines))


def _lab_ports(name: str) -> LabPorts:
    """Each kind of lab on its own ports, whichever starts first (a stopped lab may start
    again). Shared labs at + 0, + 10, + 20, the active-active one at + 30, the Kafka 3.9
    ones at + 100, + 110 (Spark: master + 5, web UIs + 6, + 7..); the secure one at
    SECURE_BASE: primary + 0 (controller + 1, mTLS + 2), secondary + 3 (+ 4, + 5), Connect
    + 6 (Spark runs in local mode: + 7 stays unused)."""
    if name == "secure":
        return LabPorts(SECURE_BASE, SECURE_BASE + 3, SECURE_BASE + 6, SECURE_BASE + 7)
    base = PORT_BASE + _LAB_OFFSETS[name]
    return LabPorts(base, base + 2, base + 4, base + 5)


# The session's labs (set while the session runs), for the hook that stops idle ones.
_session_labs: _Labs | None = None


@pytest.fixture(scope="session")
def _labs() -> Iterator[_Labs]:
    # Not under pytest's basetemp: pytest prunes old basetemps, and a second pytest run on
    # the machine could delete a running lab's files.
    global _session_labs
    root = Path(tempfile.mkdtemp(prefix="drctl-test-labs-"))
    labs = _session_labs = _Labs(root)
    try:
        yield labs
    finally:
        _session_labs = None
        labs.down()
        if labs.keep:
            print(f"\nlab files kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def spark_remote(_labs: _Labs) -> str:
    """The worker's Spark Connect server (sc://…), for a lab a test starts itself."""
    return _labs.spark_remote()


@pytest.fixture(scope="session")
def lab(request: pytest.FixtureRequest, _labs: _Labs) -> RunningLab:
    """The session's lab with topic names kept (IdentityReplicationPolicy); a test marked
    `on_kafka_3()` gets the Kafka 3.9 labs too."""
    return _labs.get(getattr(request, "param", "kept"))


@pytest.fixture
def lab_prefixed(_labs: _Labs) -> RunningLab:
    """A second lab with MM2's default naming, primary.<topic>; started only when asked for."""
    return _labs.get("prefixed")


@pytest.fixture
def lab_aa(_labs: _Labs) -> RunningLab:
    """An active-active lab (`lab up --topology active-active --separator _`): MirrorMaker 2
    both ways, names prefixed with '_'; started only when asked for."""
    return _labs.get(ACTIVE_ACTIVE)


@pytest.fixture
def lab_spark(_labs: _Labs) -> RunningLab:
    """A lab (topic names kept) with a Spark standalone master and two workers; its config's
    spark.master points at them. Started only when asked for."""
    return _labs.get("spark", spark_workers=2)


@pytest.fixture
def secure_lab(_labs: _Labs) -> RunningLab:
    """The one secured lab (`lab up --secure`: TLS, SCRAM/PLAIN/OAUTHBEARER, mTLS, ACLs,
    Connect over HTTPS with basic auth) every secure test shares. A test that changes its
    ACLs or connectors puts them back (`revoke_reverse_flow`, `restore_forward_replication`)."""
    return _labs.get("secure")


def _reverse_flow_acls() -> dict[str, list[AclBinding]]:
    """What the reverse flow's MirrorMaker 2 needs beyond what `lab up` granted the forward
    one, per cluster."""
    forward = {"primary": mm2_source_acls(),
               "secondary": mm2_target_acls("primary", CONNECT_GROUP)}
    reverse = {"secondary": mm2_source_acls(),
               "primary": mm2_target_acls("secondary", CONNECT_GROUP)}
    return {c: [b for b in bindings if b not in forward[c]] for c, bindings in reverse.items()}


def grant_reverse_flow(running: RunningLab) -> None:
    """The operator's part of a failback on the secure lab: MirrorMaker 2's principal may read
    the secondary and write the primary. A test that calls it revokes them after
    (`revoke_reverse_flow`): the lab is shared."""
    for cluster, bindings in _reverse_flow_acls().items():
        grant(running.lab.clients(running.state, cluster).admin(), bindings)


def revoke_reverse_flow(running: RunningLab) -> None:
    """Back to the ACLs `lab up` grants (a no-op when nothing was granted)."""
    for cluster, bindings in _reverse_flow_acls().items():
        admin = running.lab.clients(running.state, cluster).admin()
        filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal,
                                    b.host, b.operation, b.permission_type) for b in bindings]
        for future in admin.delete_acls(filters, request_timeout=10).values():
            future.result()


def restore_forward_replication(running: RunningLab) -> None:
    """Undo a failback on a shared lab: delete the reverse flow's connectors and run `lab up`
    again, which resumes the forward ones."""
    client = running.lab.connect_client(running.state)
    for name in client.connectors():
        if name.startswith("mm2-secondary-primary"):
            client.delete(name)
    running.lab.up(ports=running.state.ports, names_kept=running.names_kept,
                   secure=running.state.secure)


class RunningRegistries:
    """The session's schema registry per cluster, as `lab up --schema-registry` runs them.
    Tests register subjects of their own (their namespace in the name); a test that empties
    one (`empty`) leaves the two in parity again."""

    def __init__(self, registries: LabRegistries, ports: dict[str, int]) -> None:
        self.registries = registries
        self.ports = ports

    def url(self, cluster: str) -> str:
        return registry_url(self.ports[cluster])

    def client(self, cluster: str) -> RegistryClient:
        from drctl.config import HttpSettings

        return RegistryClient(cluster, HttpSettings(self.url(cluster)))

    def configure(self, config_file: Path, **urls: str) -> Path:
        """`config_file` with each cluster's schema_registry (a URL in `urls` instead)."""
        import yaml

        raw = yaml.safe_load(config_file.read_text())
        for cluster in self.ports:
            raw["clusters"][cluster]["schema_registry"] = {
                "url": urls.get(cluster, self.url(cluster))}
        config_file.write_text(yaml.safe_dump(raw))
        return config_file

    def empty(self, cluster: str) -> None:
        self.registries.empty(cluster, self.ports[cluster])

    def in_step(self) -> None:
        """The secondary's registry emptied and given the primary's, ids kept: both number
        the next schema alike, whatever earlier tests registered."""
        from drctl.lab.registry import export_registry, import_registry

        copy = export_registry(self.ports["primary"])
        self.empty("secondary")
        import_registry(self.ports["secondary"], copy)


@pytest.fixture(scope="session")
def registries(_labs: _Labs) -> Iterator[RunningRegistries]:
    """A schema registry per cluster for the session (started when a test asks for them)."""
    running = LabRegistries(_labs.root / "registries")
    ports = registry_ports(REGISTRY_BASE)
    try:
        running.up(ports)
        yield RunningRegistries(running, ports)
    finally:
        running.down()


@pytest.fixture(params=["kept", "prefixed"])
def any_lab(request: pytest.FixtureRequest, _labs: _Labs) -> RunningLab:
    """Each naming's lab (Kafka 4.x); a test marked `on_kafka_3("any_lab")` gets the Kafka
    3.9 labs too."""
    return _labs.get(request.param)


_counter = itertools.count()


@pytest.fixture
def ns(request: pytest.FixtureRequest) -> Iterator[str]:
    """A per-test prefix for topics and groups, so tests share a lab without meeting. The
    test's groups are deleted after it (`_forget_groups`)."""
    name = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:40].strip("-").lower()
    prefix = f"t{next(_counter)}-{name}"
    yield prefix
    _forget_groups(prefix)


def _forget_groups(prefix: str) -> None:
    """Delete the consumer groups named `prefix`… on every lab this worker runs. The labs'
    MirrorMaker 2 asks for every group's offsets every second or two (its checkpoint
    connector at test speed, one request per group): a test's 2,000 groups left behind
    would keep the broker and Connect busy for the rest of the session. Best effort (one
    ListGroups answer, not checked by another a second later): a cluster that is down or a
    group still in use keeps them."""
    if _session_labs is None:
        return
    for running in list(_session_labs.started.values()):
        for cluster, clients in (("primary", running.primary), ("secondary", running.secondary)):
            if not running.lab.process(cluster).is_running():
                continue
            try:
                groups = [g for g in list_groups(clients, deadline_s=10, once=True)
                          if g.startswith(prefix)]
                if groups:
                    delete_groups(clients, groups)  # a group still in use stays
            except Exception:  # noqa: BLE001 - cleanup only; the test has its verdict
                continue


# Seconds per test file of a per-commit run on the 2-core CI machine (test-times.txt, summed
# over the file's tests; a fresh clone's run of d04de88 with the matrix's diagonal kept, the
# drill's rounds and the sick-cluster rounds at their per-commit counts). Groups run heaviest
# first (--no-loadscope-reorder), so the xdist workers finish together; only the order
# matters.
_MEASURED_S = {
    "lab/test_reprotect.py": 515, "lab/test_side_by_side.py": 490,
    "lab/test_broker_restart.py": 455, "lab/test_drill_faults.py": 330,
    "lab/test_failback.py": 300, "lab/test_gap_compacted.py": 260,
    "lab/test_hard_cases.py": 210, "lab/test_spark_connect.py": 205,
    "lab/test_secure_drill.py": 195, "lab/test_app_scope.py": 190, "lab/test_guard.py": 180,
    "lab/test_fence.py": 160, "lab/test_gap_standalone.py": 130, "lab/test_gap_e2e.py": 130,
    "lab/test_switchback.py": 125, "lab/test_secure_lab.py": 120, "lab/test_failover.py": 120,
    "unit/gap/test_diff.py": 115, "lab/test_comeback.py": 115, "lab/test_schema_parity.py": 115,
    "lab/test_sick_cluster.py": 110, "lab/test_active_active.py": 105,
    "unit/kafka/test_group_answers.py": 90, "lab/test_check.py": 90,
    "lab/test_translate.py": 80, "lab/test_gap_scope.py": 60,
    "lab/test_legacy_keys.py": 60,  # a Kafka 3.9 lab of its own, one application's cycle
    "lab/test_lab.py": 45, "lab/test_readme.py": 35,
    # Last on its worker: on a fresh machine it waits for the API server's build.
    "lab/test_strimzi_lab.py": 20, "lab/test_strimzi_cycle.py": 25,
}


def labs_needed(item: pytest.Item) -> set[str]:
    """The labs besides the session's plain one (`lab`) a test runs on."""
    fixtures = getattr(item, "fixturenames", ())
    params = getattr(getattr(item, "callspec", None), "params", {})
    return ({"secure"} if "secure_lab" in fixtures else set()) \
        | ({"prefixed"} if "lab_prefixed" in fixtures else set()) \
        | ({"spark"} if "lab_spark" in fixtures else set()) \
        | ({ACTIVE_ACTIVE} if "lab_aa" in fixtures else set()) \
        | ({params[f] for f in ("lab", "any_lab") if f in params} - {"kept"})


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last test (on this worker) of the prefixed, secure, Spark or a Kafka 3.9 lab
    — their tests run one after another (`xdist_group`, the sort below) — that lab stops."""
    yield
    if item.get_closest_marker("lab"):
        # The test's own clients and contexts (those in reference cycles too) go now, and
        # with them their group-request children: a worker piled up 95 of them, alive for
        # the rest of the session.
        gc.collect()
    if _session_labs is not None:
        for name in labs_needed(item) - (labs_needed(nextitem) if nextitem else set()):
            _session_labs.stop(name)


def xdist_group(item: pytest.Item) -> str:
    """Where `make test` (--dist loadgroup) runs a test: a lab test on its own (or with its
    file's when they share a module's setup), a unit test with its file's; every test on the
    prefixed lab on two workers (`_PREFIXED_SECOND`), and every test on the secure lab or on
    one of the Kafka 3.9 labs on one. A worker starts only the labs its tests ask for: a lab
    per kind where it is needed, not on every worker."""
    needs = labs_needed(item)
    file = item.path.relative_to(Path(__file__).parent).as_posix()
    if "secure" in needs:
        return "secure-lab"
    for kind in KAFKA_3_LABS:
        if kind in needs:
            return f"{kind}-lab"
    if ACTIVE_ACTIVE in needs:
        return "active-active-lab"  # its tests one after another, on one lab
    if "prefixed" in needs:
        # Two workers, a prefixed lab each: on one they were a third of the run's wall time.
        return "prefixed-lab-2" if file in _PREFIXED_SECOND else "prefixed-lab"
    if file in _SHARED_PER_LAB:
        # A module-scoped lab per kind: the tests on one lab together, the labs side by side.
        lab = next((f for f in getattr(item, "fixturenames", ()) if f.endswith("_lab")), "")
        return f"{file}::{lab}"
    if item.get_closest_marker("lab") and file not in _SHARED_SETUP:
        # A lab test on its own: a file's heavy cycles run on the workers side by side.
        return f"{file}::{getattr(item, 'originalname', item.name)}"
    if item.get_closest_marker("spark") and not item.get_closest_marker("lab"):
        # The unit tests' local Spark session (tests/spark_support.py) is one JVM per
        # worker: one worker starts and warms it, not one per file.
        return "local-spark-session"
    return file


# The prefixed lab's second worker takes these files' prefixed tests (about half the time).
_PREFIXED_SECOND = {"lab/test_reprotect.py", "lab/test_switchback.py", "lab/test_translate.py",
                    "lab/test_check.py", "lab/test_failover.py", "lab/test_readme.py",
                    "lab/test_lab.py"}

# Lab test files whose tests share a module-scoped fixture: kept on one worker together.
_SHARED_SETUP = {"lab/test_schema_parity.py", "lab/test_legacy_keys.py",
                 "lab/test_strimzi_lab.py", "lab/test_strimzi_cycle.py"}
# ... and files with a module-scoped lab per kind: each lab's tests on one worker.
_SHARED_PER_LAB = {"lab/test_drill_faults.py"}

# Files whose tests run whole incidents (failover, failback, return) on the shared secure lab.
# They hand it on restored, yet MirrorMaker 2 once stopped copying a new topic half-way right
# after one (CI, 16 of 20 records in 90 s): the lab's other checks run first, on the lab as
# `lab up` made it.
_CYCLES_LAST = {"test_fence.py", "test_secure_drill.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("matrix"):
        off = [item for item in items if item.get_closest_marker("matrix")]
        if off:
            config.hook.pytest_deselected(items=off)
            items[:] = [item for item in items if not item.get_closest_marker("matrix")]
    per_file: dict[str, int] = {}
    for item in items:
        name = item.path.relative_to(Path(__file__).parent).as_posix()
        per_file[name] = per_file.get(name, 0) + 1
    group_cost: dict[str, float] = {}
    for item in items:
        name = item.path.relative_to(Path(__file__).parent).as_posix()
        default = 60 if item.get_closest_marker("lab") else 1
        group = xdist_group(item)
        group_cost[group] = group_cost.get(group, 0) + _MEASURED_S.get(name, default) / \
            per_file[name]
    # Stable: a group keeps its files' order, but for a shared lab's whole cycles, last.
    items.sort(key=lambda item: (-group_cost[xdist_group(item)],
                                 item.path.name in _CYCLES_LAST))
    if config.getoption("loadgroup", False):
        _name_groups(items)


def _name_groups(items: list[pytest.Item]) -> None:
    """What pytest-xdist's worker does for xdist_group marks under --dist loadgroup: the
    group ends the node id ("…@group"), which its scheduler splits off. xdist 3.8 writes the
    old `_nodeid` attribute, which pytest 9 no longer reads (its tests then scatter one by
    one, every worker starting every lab): done here on the node id pytest reads."""
    from _pytest.nodeid import coerce_node_id

    for item in items:
        if "@" not in item.nodeid.rpartition("]")[2]:
            group = xdist_group(item).replace("::", "--")
            item._id = coerce_node_id(f"{item.nodeid}@{group}")
