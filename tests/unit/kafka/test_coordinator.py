"""The group requests' child process itself (kafka/coordinator.py): what it imports, how long
drctl waits for one that stopped answering, and that it ends with the clients that made it.
Real child processes; no Kafka (a configuration librdkafka refuses answers at once, and a
stand-in program plays the stuck child)."""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from drctl.errors import ExitStatus, Unreachable
from drctl.kafka import coordinator
from drctl.kafka.clients import ClusterClients
from drctl.kafka.coordinator import Coordinator, CoordinatorDied, CoordinatorRejected
from drctl.kafka.groups import committed_offsets

# librdkafka refuses to build a client from it: the child answers every request "rejected"
# at once, and lives on until its stdin closes.
REFUSED = {"bootstrap.servers": "127.0.0.1:9", "no.such.property": "1"}


def _dead(pid: int) -> bool:
    """Gone, or a zombie waiting for a parent that is not the test (killed all the same)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _dies(pid: int) -> bool:
    """Whether `pid` ends: a process sent SIGKILL (not waited for by the test) takes a
    moment to go; one that nothing killed is still there after a minute."""
    import time

    for _ in range(600):
        if _dead(pid):
            return True
        time.sleep(0.1)
    return False


def _finished(call: Callable[[], Any], within_s: float = 60) -> Any:
    """`call()`'s result or error, run in a thread: a wait that never ends (or one that
    lasts the old 35 s) must fail the test, not hang the run; `within_s` is far past any
    deadline here."""
    done: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            done.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - raised in the test's thread
            done.append((False, exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within_s)
    assert done, "drctl was still waiting for the child"
    ok, value = done[0]
    if not ok:
        raise value
    return value


@pytest.mark.parametrize("hostile", ["queue.py", "drctl/__init__.py"])
def test_the_child_imports_nothing_from_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostile: str) -> None:
    """`python -m` put the working directory first on the child's path: a `queue.py` or a
    `drctl/` there ran with the operator's rights, and would have read the cluster's
    properties (sasl.password) from the child's stdin."""
    marker = tmp_path / "imported"
    cwd = tmp_path / "shared-runbooks"
    planted = cwd / hostile
    planted.parent.mkdir(parents=True)
    planted.write_text(f"open({str(marker)!r}, 'w').write(__file__)\n")
    monkeypatch.chdir(cwd)
    child = Coordinator("c", REFUSED)
    try:
        with pytest.raises(CoordinatorRejected, match="no.such.property"):
            list(child.request("list", [None], 1.0))
    finally:
        child.close()
    assert not marker.exists(), f"the child imported {marker.read_text()}"


# A child that reads its requests and answers none, with a grandchild (as kinit is) holding
# its stdout: the pipe stays open after the child itself is killed. Once the grandchild runs
# it says it is ready, as the real child does once its clients are built.
_STUCK = """
import pickle, struct, subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(grandchild.pid))
said = pickle.dumps(("ready",))
sys.stdout.buffer.write(struct.pack(">I", len(said)) + said)
sys.stdout.buffer.flush()
sys.stdin.buffer.read()
time.sleep(600)
"""


@pytest.fixture
def stuck(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Children started from now on are stuck ones; the file gets the grandchild's pid."""
    pid_file = tmp_path / "grandchild"
    monkeypatch.setattr(coordinator, "_command",
                        lambda: [sys.executable, "-c", _STUCK, str(pid_file)])
    monkeypatch.setattr(coordinator, "_DEATH_WAIT_S", 1.0)
    return pid_file


def test_a_stuck_child_is_killed_with_its_process_group_and_its_death_waited_for_bounded(
        stuck: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed alone, the child left its grandchild holding the pipe: its reader never saw
    the end, and drctl waited for its death for ever."""
    monkeypatch.setattr(coordinator, "_STUCK_AFTER_S", 0.5)
    child = Coordinator("c", {})
    try:
        child.start()
        grandchild = _written(stuck)  # running, before the silence counts
        with pytest.raises(CoordinatorDied) as died:
            _finished(lambda: list(child.request("offsets", ["g"], 0.5)))
        assert died.value.hung
        assert died.value.describe() == \
            "the Kafka client for the group coordinators stopped answering"
        assert _dies(grandchild)  # it went with the child
    finally:
        child.close()


class _Clients:
    """A cluster's clients whose group requests go to one real child."""

    def __init__(self, deadline_s: float) -> None:
        self.name, self.bootstrap = "dc1", "dc1:9092"
        self.properties = {"bootstrap.servers": self.bootstrap}
        self.deadline_s = deadline_s
        self.notify = None
        self.child = Coordinator(self.name, {})

    def coordinator(self) -> Coordinator:
        return self.child


def test_a_silent_child_ends_the_request_at_the_deadline_not_30_s_after_it(
        stuck: Path) -> None:
    """The parent waited for a silent child its request's timeout plus 30 s (35 s at least)
    whatever the --deadline; now the deadline ends the wait (exit 4), and the child is left
    to answer late or be found stuck by a later request."""
    clients = _Clients(deadline_s=1.0)
    try:
        with pytest.raises(Unreachable) as caught:
            _finished(lambda: committed_offsets(clients, ["g"]), within_s=20)
        assert caught.value.exit_status == ExitStatus.UNREACHABLE
        assert caught.value.message.startswith(
            "cluster 'dc1' at dc1:9092 did not answer the committed offsets (OffsetFetch) of 1 "
            "of 1 group(s) for ")
        assert clients.child.pid is not None  # not killed: it may be waiting for a broker
        grandchild = _written(stuck)
    finally:
        _finished(clients.child.close)  # bounded too: the child ignores its stdin's end
    assert clients.child.pid is None and _dies(grandchild)


def _written(path: Path) -> int:
    """The pid the stuck child writes once it runs (its start is not bounded in time)."""
    import time

    for _ in range(600):
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.1)
    raise AssertionError("the stand-in child never started")


def test_clients_dropped_without_close_take_their_child_with_them() -> None:
    """The child's reader thread held the clients (through the wire-log callback): dropped
    clients were never collected, and every child of a long-lived process (a runbook, the
    test suite's workers) lived until it exited."""
    clients = ClusterClients("c", REFUSED)
    with pytest.raises(CoordinatorRejected):
        list(clients.coordinator().request("list", [None], 1.0))
    pid = clients.coordinator().pid
    assert pid is not None and not _dead(pid)
    del clients
    gc.collect()
    assert _dead(pid)


def test_clients_closed_by_their_with_block_end_their_child() -> None:
    with ClusterClients("c", REFUSED) as clients:
        with pytest.raises(CoordinatorRejected):
            list(clients.coordinator().request("list", [None], 1.0))
        pid = clients.coordinator().pid
        assert pid is not None
    assert _dead(pid) and clients.coordinator().pid is None


def test_children_are_not_in_the_parents_process_group() -> None:
    """Their own group: what a stuck child's kill ends includes its grandchildren."""
    child = Coordinator("c", REFUSED)
    try:
        with pytest.raises(CoordinatorRejected):
            list(child.request("list", [None], 1.0))
        pid = child.pid
        assert pid is not None and os.getpgid(pid) == pid != os.getpgid(0)
    finally:
        child.close()
