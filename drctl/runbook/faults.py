"""Faults at moments nobody chose: a `fault:` step plans them from a seed, and the injector
here lands them while the steps of its window run, then heals what they broke.

A fault is a signal and a target: SIGKILL (a machine lost), SIGSTOP for a few seconds then
SIGCONT (a pause: a long GC, a frozen VM), or SIGTERM (an orderly stop nobody asked for), to
a lab process (a broker of either cluster, the Connect worker, the Spark Connect server), to
the drctl step that is running (a step with `process: child`: its whole process group), or —
on clusters that are not the lab — through shell commands the team supplies (its own
`systemctl kill`, `kubectl delete pod`, and the command that heals it).

Each planned fault is aimed at a step of the window and a moment into it (seconds from the
step's start). When that step ends before the moment, or its target is not running then, the
fault goes on to its moment in the next step of the window that may take it; past the last,
it missed (and says so). A fault aimed at a step that failed waits for the step's next run
(the runbook's resume). A server a kill or a term took down does not come back by itself: it
is started again after `restart_after`, as an operator's systemd would (`Restart=always`),
and the step's end waits until it is back. Every fault and every healing is a journal record
(`fault`, `fault-healed`), so a resumed run lands only the faults not landed yet, and a
campaign's scorecard says where each landed (step, seconds into it, the operation's last
progress line and its phase in the failover marker).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from drctl.errors import DrctlError
from drctl.progress import Notify


class FaultSignal(StrEnum):
    kill = "kill"  # SIGKILL: the machine is lost
    stop = "stop"  # SIGSTOP for `stop_for`, then SIGCONT: a pause
    term = "term"  # SIGTERM: an orderly stop nobody asked for


STEP_TARGET = "step"
LAB_TARGETS = ("primary", "secondary", "connect", "spark-connect")
_SIGNALS = {FaultSignal.kill: signal.SIGKILL, FaultSignal.term: signal.SIGTERM,
            FaultSignal.stop: signal.SIGSTOP}
# How long a server may take over an orderly stop (SIGTERM) before it is killed.
TERM_GRACE_S = 60.0
_TICK_S = 0.05


@dataclass(frozen=True)
class WindowEntry:
    """A step of the window: where a fault may land, on which targets (None: any), and how
    far into the step (seconds, drawn uniformly)."""

    step: str
    targets: tuple[str, ...] | None = None
    within: tuple[float, float] = (1.0, 20.0)

    def takes(self, target: str) -> bool:
        return self.targets is None or target in self.targets


@dataclass(frozen=True)
class FaultSpec:
    """A `fault:` step's inputs, rendered."""

    count: int
    seed: str
    window: tuple[WindowEntry, ...]
    targets: tuple[str, ...]
    signals: tuple[FaultSignal, ...]
    stop_for: tuple[float, float] = (1.0, 4.0)
    restart_after: float = 1.0


@dataclass(frozen=True)
class PlannedFault:
    """One fault: what it does, and where it may land — (step, seconds into it), the first
    where it is aimed, the others where it goes when a step ends before its moment."""

    id: str
    signal: FaultSignal
    target: str
    moments: tuple[tuple[str, float], ...]
    stop_for_s: float

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "signal": self.signal.value, "target": self.target,
                "moments": [{"step": s, "at_s": round(t, 3)} for s, t in self.moments],
                "stop_for_s": round(self.stop_for_s, 3)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlannedFault:
        return cls(str(data["id"]), FaultSignal(data["signal"]), str(data["target"]),
                   tuple((str(m["step"]), float(m["at_s"])) for m in data["moments"]),
                   float(data["stop_for_s"]))


def plan_faults(spec: FaultSpec, name: str,
                supports: Callable[[str, FaultSignal], bool]) -> list[PlannedFault]:
    """`spec.count` faults, the same for the same seed. Signals and targets are each dealt
    from a seeded shuffle in turn, so that `count` faults cover every signal and every target
    once `count` reaches their number; a target that cannot take a signal (a command target
    without that command) or land in the window gives its turn to the next."""
    rng = random.Random(f"{spec.seed}/{name}")
    signals = list(spec.signals)
    targets = list(spec.targets)
    rng.shuffle(signals)
    rng.shuffle(targets)
    planned: list[PlannedFault] = []
    for i in range(spec.count):
        sig = signals[i % len(signals)]
        for j in range(len(targets)):
            target = targets[(i + j) % len(targets)]
            entries = [e for e in spec.window if e.takes(target)]
            if entries and supports(target, sig):
                break
        else:
            continue
        aim = rng.randrange(len(entries))
        moments = tuple((e.step, rng.uniform(*e.within)) for e in entries[aim:])
        planned.append(PlannedFault(f"{name}#{i + 1}", sig, target, moments,
                                    rng.uniform(*spec.stop_for)))
    return planned


# -- targets --------------------------------------------------------------------------------


class Target(Protocol):
    name: str

    def supports(self, sig: FaultSignal) -> bool: ...

    def running(self) -> bool: ...

    def send(self, sig: FaultSignal | None) -> None:
        """Deliver the fault's signal; None: SIGCONT (the end of a stop)."""
        ...

    def gone(self, deadline_s: float) -> bool:
        """Whether it stopped within `deadline_s` (after a term)."""
        ...

    def heal(self, notify: Notify) -> str:
        """Start it again and wait until it answers; how, in a few words."""
        ...


class LabTarget:
    """A process of the lab, by its pid file: a broker, the Connect worker, the Spark Connect
    server."""

    def __init__(self, lab_dir: Path, name: str) -> None:
        from drctl.lab.lab import Lab

        self.name = name
        self.lab = Lab(lab_dir)
        if name == "spark-connect":
            state = self.lab.load_state()
            server = self.lab.spark_server(state.ports)
            if self.lab.spark_remote(state) != server.url:
                raise DrctlError(f"The lab in {self.lab.dir} runs no Spark Connect server of "
                                 "its own to fault.",
                                 "Leave spark-connect out of the fault's targets, or start the "
                                 "lab with a server of its own.")
            self.process = server.process()
        else:
            self.process = self.lab.process(name)

    def supports(self, sig: FaultSignal) -> bool:
        return True

    def running(self) -> bool:
        return self.process.is_running()

    def send(self, sig: FaultSignal | None) -> None:
        pid = self.process.pid()
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGCONT if sig is None else _SIGNALS[sig])
        except ProcessLookupError:
            pass

    def gone(self, deadline_s: float) -> bool:
        pid = self.process.pid()
        end = time.monotonic() + deadline_s
        while self.process.is_running():
            if time.monotonic() > end:
                return False
            time.sleep(0.1)
        if pid is not None:
            try:  # reaped when this process started it (a heal of an earlier fault did)
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        return True

    def heal(self, notify: Notify) -> str:
        if self.name == "spark-connect":
            self.process.pid_file.unlink(missing_ok=True)
            state = self.lab.load_state()
            self.lab.spark_server(state.ports).up(notify)
        else:
            # As systemd would: started, and answering; what it serves is drctl's to handle.
            self.lab.heal(self.name, notify, settle=False)
        return "restarted by the drill (as systemd would)"


class CommandTarget:
    """A server of clusters that are not the lab, through the team's shell commands: `kill`,
    `term`, `stop` and `cont`, `heal` (starts it and returns once it answers), and optionally
    `running` (exit 0 while it runs)."""

    KEYS = ("kill", "term", "stop", "cont", "heal", "running")

    def __init__(self, name: str, commands: Mapping[str, str], timeout_s: float = 600.0) -> None:
        self.name = name
        self.commands = dict(commands)
        self.timeout_s = timeout_s

    def supports(self, sig: FaultSignal) -> bool:
        needs = {FaultSignal.kill: ("kill", "heal"), FaultSignal.term: ("term", "heal"),
                 FaultSignal.stop: ("stop", "cont")}[sig]
        return all(self.commands.get(k) for k in needs)

    def _run(self, key: str) -> subprocess.CompletedProcess[str]:
        # Output to files, not pipes: a heal that starts a daemon in the background leaves it
        # holding the command's stdout, and a pipe would be read until the daemon ends.
        with tempfile.TemporaryFile("w+") as out:
            done = subprocess.run(["/bin/sh", "-c", self.commands[key]], stdout=out,
                                  stderr=subprocess.STDOUT, text=True, timeout=self.timeout_s,
                                  stdin=subprocess.DEVNULL)
            out.seek(0)
            return subprocess.CompletedProcess(done.args, done.returncode, out.read(), "")

    def running(self) -> bool:
        if not self.commands.get("running"):
            return True
        return self._run("running").returncode == 0

    def send(self, sig: FaultSignal | None) -> None:
        self._command("cont" if sig is None else sig.value)

    def gone(self, deadline_s: float) -> bool:
        return True  # the team's `term` returns once it stopped

    def heal(self, notify: Notify) -> str:
        self._command("heal")
        return "healed by its heal command"

    def _command(self, key: str) -> None:
        done = self._run(key)
        if done.returncode != 0:
            raise DrctlError(f"The fault command '{key}' of {self.name} exited "
                             f"{done.returncode}: {done.stdout.strip()[-300:]}")


# -- the injector ---------------------------------------------------------------------------


@dataclass
class _Armed:
    fault: PlannedFault
    targets: Mapping[str, Target]
    restart_after_s: float
    aim: int = 0

    @property
    def moment(self) -> tuple[str, float]:
        return self.fault.moments[self.aim]


@dataclass
class _Landed:
    fault_id: str
    target: str
    thread: threading.Thread


@dataclass
class FaultInjector:
    """Lands armed faults while the executor runs the steps of their windows. The executor
    tells it when a step starts and ends, which process runs a `process: child` step, and the
    steps' progress lines; it writes `fault` and `fault-healed` records through `record`."""

    record: Callable[[dict[str, Any]], None]
    notify: Notify = lambda _: None
    # Where the operation stands, for a fault's record (the failover marker's phase).
    where: Callable[[], dict[str, Any]] = dict
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _armed: dict[str, _Armed] = field(default_factory=dict)
    _running: tuple[str, float] | None = None
    _children: dict[str, int] = field(default_factory=dict)
    _progress: dict[str, str] = field(default_factory=dict)
    _landed: dict[str, list[_Landed]] = field(default_factory=dict)
    # Step processes a kill or term was sent to: each is ending (a zombie still answers a
    # signal until the executor reaps it), so a later fault on the step waits for its next
    # run rather than landing on a process already dead.
    _ending: set[int] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ticker: threading.Thread | None = None
    _closed: threading.Event = field(default_factory=threading.Event)

    def arm(self, faults: Sequence[PlannedFault], targets: Mapping[str, Target],
            restart_after_s: float, done_steps: frozenset[str] = frozenset()) -> None:
        """Arm `faults`; moments in `done_steps` (completed by an earlier run) are passed."""
        with self._lock:
            for fault in faults:
                armed = _Armed(fault, targets, restart_after_s)
                while armed.aim < len(fault.moments) and armed.moment[0] in done_steps:
                    armed.aim += 1
                if armed.aim < len(fault.moments):
                    self._armed[fault.id] = armed
                else:
                    self._missed(armed, "every step of its window had run before")
            if self._armed and self._ticker is None:
                self._ticker = threading.Thread(target=self._loop, daemon=True,
                                                name="fault-injector")
                self._ticker.start()

    @property
    def armed(self) -> list[PlannedFault]:
        with self._lock:
            return [a.fault for a in self._armed.values()]

    def step_started(self, name: str) -> None:
        with self._lock:
            self._running = (name, self.clock())
            self._progress.pop(name, None)

    def progress(self, name: str, line: str) -> None:
        self._progress[name] = line

    def child(self, name: str, pid: int | None) -> None:
        with self._lock:
            if pid is None:
                self._children.pop(name, None)
            else:
                self._children[name] = pid

    def step_ended(self, name: str, completed: bool) -> None:
        """The step ended: wait until what its faults broke is back (a restarted server, a
        stopped one continued); faults aimed at it that did not land go on to their next
        moment — unless it failed: then they wait for its next run."""
        with self._lock:
            self._running = None
            landed = self._landed.pop(name, [])
        for one in landed:
            one.thread.join()
        if not completed:
            return
        with self._lock:
            for armed in list(self._armed.values()):
                if armed.moment[0] == name:
                    self._carry(armed, f"{name} ended before its moment")

    def close(self) -> None:
        """The run ends: wait for faults still healing; armed ones stay unlanded (a resumed
        run arms them again)."""
        with self._lock:
            landed = [one for ones in self._landed.values() for one in ones]
            self._landed.clear()
        for one in landed:
            one.thread.join()
        self._closed.set()
        if self._ticker is not None:
            self._ticker.join(5)

    # -- inside --------------------------------------------------------------------------

    def _carry(self, armed: _Armed, why: str) -> None:
        """On to the fault's next moment (the lock is held)."""
        armed.aim += 1
        if armed.aim >= len(armed.fault.moments):
            self._armed.pop(armed.fault.id, None)
            self._missed(armed, why)

    def _missed(self, armed: _Armed, why: str) -> None:
        fault = armed.fault
        self.record({"type": "fault", "fault": fault.id, "signal": fault.signal.value,
                     "target": fault.target, "landed": False, "aimed_at": fault.moments[0][0],
                     "why": f"missed its window: {why}"})

    def _busy(self, target: str) -> bool:
        return any(one.target == target and one.thread.is_alive()
                   for ones in self._landed.values() for one in ones)

    def _loop(self) -> None:
        while not self._closed.is_set():
            self._tick()
            self.sleep(_TICK_S)

    def _tick(self) -> None:
        with self._lock:
            if self._running is None:
                return
            name, started = self._running
            at_s = self.clock() - started
            for armed in list(self._armed.values()):
                step, moment = armed.moment
                if step != name or at_s < moment or self._busy(armed.fault.target):
                    continue
                target = armed.fault.target
                pid = self._children.get(name)
                if target == STEP_TARGET and pid is None:
                    self._carry(armed, f"{name} ran no process of its own then")
                    continue
                if target == STEP_TARGET and pid in self._ending:
                    continue  # the step fails; the fault waits for its next run
                if target == STEP_TARGET and armed.fault.signal != FaultSignal.stop:
                    assert pid is not None
                    self._ending.add(pid)
                del self._armed[armed.fault.id]
                thread = threading.Thread(target=self._land, args=(armed, name, at_s, pid),
                                          daemon=True, name=f"fault-{armed.fault.id}")
                self._landed.setdefault(name, []).append(_Landed(armed.fault.id, target,
                                                                 thread))
                thread.start()

    def _land(self, armed: _Armed, step: str, at_s: float, pid: int | None) -> None:
        fault = armed.fault
        target: Target = (_StepProcess(pid) if fault.target == STEP_TARGET
                          else armed.targets[fault.target])
        try:
            if not target.running():
                with self._lock:
                    self._armed[fault.id] = armed
                    self._carry(armed, f"{fault.target} was not running in {step}")
                return
            where = {"progress": self._progress.get(step)}
            try:
                where.update(self.where())
            except Exception:  # noqa: BLE001 - where it stood is a note, never a failure
                pass
            self.record({"type": "fault", "fault": fault.id, "signal": fault.signal.value,
                         "target": fault.target, "landed": True, "step": step,
                         "at_s": round(at_s, 3), "aimed_at": fault.moments[0][0],
                         "carried": armed.aim > 0, **where})
            self.notify(f"Fault {fault.id}: {fault.signal.value} {fault.target}, "
                        f"{at_s:.1f} s into {step}")
            healed = self._act(armed, target)
        except Exception as exc:  # noqa: BLE001 - recorded; the steps find what is broken
            healed = {"how": "not healed", "error": f"{type(exc).__name__}: {exc}"}
        self.record({"type": "fault-healed", "fault": fault.id, **healed})

    def _act(self, armed: _Armed, target: Target) -> dict[str, Any]:
        fault = armed.fault
        if fault.signal == FaultSignal.stop:
            target.send(FaultSignal.stop)
            self.sleep(fault.stop_for_s)
            target.send(None)
            return {"how": f"continued after {fault.stop_for_s:.1f} s"}
        target.send(fault.signal)
        if fault.target == STEP_TARGET:
            return {"how": "the step failed; the runbook's resume runs it again"}
        if fault.signal == FaultSignal.term and not target.gone(TERM_GRACE_S):
            target.send(FaultSignal.kill)
        target.gone(30.0)
        self.sleep(armed.restart_after_s)
        started = self.clock()
        how = target.heal(self.notify)
        return {"how": how, "took_s": round(self.clock() - started, 3)}


class _StepProcess:
    """The process group of the step that runs (`process: child`)."""

    name = STEP_TARGET

    def __init__(self, pid: int | None) -> None:
        self.pid = pid

    def supports(self, sig: FaultSignal) -> bool:
        return True

    def running(self) -> bool:
        if self.pid is None:
            return False
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def send(self, sig: FaultSignal | None) -> None:
        assert self.pid is not None
        try:
            os.killpg(self.pid, signal.SIGCONT if sig is None else _SIGNALS[sig])
        except ProcessLookupError:
            pass

    def gone(self, deadline_s: float) -> bool:
        return True

    def heal(self, notify: Notify) -> str:
        return "the runbook's resume runs the step again"


def lab_targets(lab_dir: Path, names: Sequence[str] | None = None) -> dict[str, Target]:
    """The lab's processes a fault may target (`names`, or all there are): its brokers and
    Connect worker, and its Spark Connect server when it runs one of its own."""
    from drctl.lab.lab import Lab

    lab = Lab(lab_dir)
    state = lab.load_state()
    own_server = lab.spark_remote(state) == lab.spark_server(state.ports).url
    there = [t for t in LAB_TARGETS if t != "spark-connect" or own_server]
    return {name: LabTarget(lab_dir, name) for name in there if names is None or name in names}


def heal_left_broken(faults: Mapping[str, Mapping[str, Any]],
                     fault_steps: Sequence[Mapping[str, Any]],
                     notify: Notify = lambda _: None) -> list[str]:
    """What an operator does before running a failed step again: continue every lab process
    a stop left stopped, and start again every server a landed fault took down that was not
    seen back (its heal failed, or the run ended before it). `faults`: a journal's fault
    records by id; `fault_steps`: the inputs of its fault steps (their lab and commands).
    Returns what was healed."""
    healed: list[str] = []
    targets: dict[str, Target] = {}
    for inputs in fault_steps:
        if inputs.get("lab"):
            lab_dir = Path(str(inputs["lab"]))
            healed += [f"{name} (continued)" for name in continue_stopped(lab_dir)]
            targets.update(lab_targets(lab_dir))
        for name, cmds in (inputs.get("commands") or {}).items():
            targets[str(name)] = CommandTarget(str(name), {k: str(v) for k, v in cmds.items()})
    broken = {f["target"] for f in faults.values()
              if f.get("landed") and f["target"] != STEP_TARGET
              and (f.get("healed") or {}).get("how", "not healed") == "not healed"}
    for name in sorted(broken):
        target = targets.get(name)
        if target is None or target.running():
            continue
        notify(f"Starting {name} again: a fault took it down and it did not come back")
        try:
            target.heal(notify)
        except DrctlError as exc:  # the step run again finds it down, and says so
            notify(f"{name} did not come back: {exc.message}")
            continue
        healed.append(name)
    return healed


def continue_stopped(lab_dir: Path) -> list[str]:
    """SIGCONT to every lab process left stopped (a run that ended in the middle of a stop
    fault): what a campaign does before it goes on."""
    from drctl.lab.lab import COMPONENTS, Lab

    lab = Lab(lab_dir)
    state = lab.load_state()
    processes = [lab.process(c) for c in COMPONENTS] + [lab.spark_server(state.ports).process()]
    continued = []
    for proc in processes:
        pid = proc.pid()
        if pid is None or not proc.is_running():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[-1].split()[0] == "T":
            os.kill(pid, signal.SIGCONT)
            continued.append(proc.name)
    return continued
