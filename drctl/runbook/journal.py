"""The run journal: JSON Lines, appended, flushed and fsynced after every record.

Records (`type`): `run` (header: runbook, digest, variables), `step-start` (resolved inputs),
`step-end` (status, outputs, error, whether the run moved past the step), `resume`,
`fault` and `fault-healed` (a fault step's faults as they land and are healed:
runbook/faults.py), and `run-end`. Everything passes through the run's Redactor first, so
no secret reaches the disk. A crash (even SIGKILL) loses at most the record being written;
`--resume` continues after the last completed step, re-running a step that had started but
not ended.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from drctl.errors import UsageError
from drctl.jsonable import to_jsonable
from drctl.runbook.templating import plain
from drctl.secrets import Redactor

JOURNAL_VERSION = 1


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def run_digest(source: str, variables: Mapping[str, Any],
               config_data: Mapping[str, Any] | None) -> str:
    """What a resumed run must share with the first: runbook text, variables as given
    (references unresolved, secret literals left out) and, when used, the configuration."""
    payload = json.dumps({"source": source, "vars": to_jsonable(variables),
                          "config": to_jsonable(config_data)}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def source_digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


class JournalBusy(UsageError):
    pass


class Journal:
    """Open for the whole run, locked so two runs cannot write (or resume) it at once."""

    def __init__(self, path: Path, redactor: Redactor) -> None:
        self.path = path
        self.redactor = redactor
        # Faults land and heal on threads of their own (runbook/faults.py).
        self._lock = threading.Lock()
        created = not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a+", encoding="utf-8")
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.close()
            raise JournalBusy(f"Another drctl run is writing the journal {path}.",
                              "Wait for it to end, or stop it first.") from None
        self._drop_torn_record()
        if created:
            # The new directory entry must survive a crash too.
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def _drop_torn_record(self) -> None:
        """A crash mid-write leaves a partial last line; appending after it would glue the
        next record to it."""
        fd = self._file.fileno()
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        keep, end = 0, size
        while end > 0 and not keep:
            start = max(0, end - 64 * 1024)
            newline = os.pread(fd, end - start, start).rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
            end = start
        os.ftruncate(fd, keep)
        os.fsync(fd)

    def write(self, record: Mapping[str, Any]) -> None:
        data = self.redactor.plain_data(plain({"time": now_iso(), **record}))
        with self._lock:
            self._file.write(json.dumps(data, separators=(",", ":"), default=str) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


class ResumeRefused(UsageError):
    pass


@dataclass
class JournalState:
    path: Path
    header: dict[str, Any]
    # Main-phase steps the run moved past, by name: their last step-end record.
    completed: dict[str, dict[str, Any]] = field(default_factory=dict)
    rolled_back: bool = False
    finished: dict[str, Any] | None = None
    # The faults of its fault steps by id, as they landed (or missed) and were healed.
    faults: dict[str, dict[str, Any]] = field(default_factory=dict)


def journal_records(path: Path) -> list[dict[str, Any]]:
    """Every record of a journal, in order (a last one a crash cut short left out)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ResumeRefused(f"{path}: cannot read the journal: {exc.strerror}.") from exc
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):
                break  # a record cut short by a crash; everything before it holds
            raise ResumeRefused(f"{path}:{number}: not a journal record.") from None
    return records


def read_journal(path: Path) -> JournalState:
    records = journal_records(path)
    if not records or records[0].get("type") != "run":
        raise ResumeRefused(f"{path} is not a drctl runbook journal.")
    header = records[0]
    if header.get("version") != JOURNAL_VERSION:
        raise ResumeRefused(f"{path}: journal version {header.get('version')} is not "
                            f"{JOURNAL_VERSION}.")
    state = JournalState(path, header)
    for record in records[1:]:
        kind = record.get("type")
        if kind == "step-end" and record.get("phase") == "main":
            if record.get("completed"):
                state.completed[record["step"]] = record
            else:
                state.completed.pop(record["step"], None)
        elif kind == "step-start" and record.get("phase") == "rollback":
            state.rolled_back = True
        elif kind == "run-end":
            state.finished = record
        elif kind == "fault":
            state.faults[record["fault"]] = dict(record)
        elif kind == "fault-healed" and record.get("fault") in state.faults:
            state.faults[record["fault"]]["healed"] = dict(record)
        elif kind == "resume":
            state.finished = None
    return state


def check_resumable(state: JournalState, *, runbook_path: Path, source: str, digest: str,
                    variables: Mapping[str, Any], steps: list[str]) -> None:
    """Refuse, saying why, unless this run is the journal's run continued."""
    header = state.header
    where = f"The journal {state.path}"
    if header.get("dry_run"):
        raise ResumeRefused(f"{where} is from a plan (dry run); there is nothing to resume.",
                            "Run the runbook without --resume.")
    if state.rolled_back:
        raise ResumeRefused(f"{where} records a rollback; the steps it undid cannot be "
                            "continued.", "Start a new run without --resume.")
    if state.finished is not None and state.finished.get("status") == "succeeded":
        raise ResumeRefused(f"{where} records a run that already succeeded.",
                            "Start a new run without --resume.")
    if state.finished is not None and all(name in state.completed for name in steps):
        raise ResumeRefused(f"{where} records a finished run (status "
                            f"{state.finished.get('status')}) with no step left to run.",
                            "Start a new run without --resume.")
    if header.get("source_digest") != source_digest(source):
        raise ResumeRefused(
            f"The runbook {runbook_path} changed since the journal {state.path} was written "
            f"(it ran {header.get('runbook')}).",
            "Resuming would mix two different procedures; restore the original runbook or "
            "start a new run without --resume.")
    if header.get("digest") != digest:
        before = header.get("vars_as_given") or {}
        changed = sorted(k for k in set(before) | set(variables)
                         if before.get(k) != to_jsonable(variables.get(k)))
        detail = (f"variables changed: {', '.join(changed)}" if changed
                  else "the configuration it uses changed")
        raise ResumeRefused(
            f"The run in {state.path} used other values ({detail}).",
            "Pass the same --var/--vars-file values and configuration as the first run, or "
            "start a new run without --resume.")
