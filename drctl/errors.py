"""The one error hierarchy of drctl and the exit statuses it maps to (docs/design.md §9).

The core raises these; only the CLI edge turns them into a message and an exit status.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Self


class ExitStatus(IntEnum):
    SUCCESS = 0
    FAILURE = 1
    USAGE = 2  # usage or configuration error
    CHECK_FAILED = 3  # a check did not hold: gap, order conflict, preflight
    UNREACHABLE = 4  # a cluster or service unreachable after retries
    ABORTED = 5  # aborted by the operator (or an approval that was not given)
    INTERRUPTED = 130


class DrctlError(Exception):
    """An error an operator can act on: what happened, and what to do about it. `transient`:
    whether waiting for a cluster may cure it (drctl/kafka/retriable.py)."""

    exit_status: ExitStatus = ExitStatus.FAILURE
    transient = False

    def __init__(self, message: str, hint: str | None = None, *,
                 detail: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        # The library's own words (librdkafka's, urllib's): shown with --debug only, the
        # message says the cause once in words.
        self.detail = detail

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} {self.hint}"


class UsageError(DrctlError):
    exit_status = ExitStatus.USAGE


class ConfigError(UsageError):
    """A configuration file that cannot be used; names the file and the key path."""

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None,
                 hint: str | None = None, problems: Sequence[ConfigError] = ()) -> None:
        where = ""
        if path:
            where = f"{path}: "
        if key:
            where += f"{key}: "
        super().__init__(where + message, hint)
        self.reason = message  # without the file and key
        self.path = path
        self.key = key
        # Every problem of a file when there were several (this error lists them all).
        self.problems = tuple(problems)

    @classmethod
    def of(cls, problems: Sequence[ConfigError], path: str | None = None) -> ConfigError:
        """One error for several problems, each listed with its key path and hint."""
        if len(problems) == 1:
            return problems[0]
        lines = []
        for problem in problems:
            where = f"{problem.key}: " if problem.key else ""
            lines.append(f"  - {where}{problem.reason}"
                         + (f"\n    {problem.hint}" if problem.hint else ""))
        return cls(f"{len(problems)} problems:\n" + "\n".join(lines), path=path,
                   problems=problems)


class CheckFailed(DrctlError):
    exit_status = ExitStatus.CHECK_FAILED


class Unreachable(DrctlError):
    """A cluster or a Connect worker did not answer (exit 4). Transient: waiting may cure it
    (drctl/kafka/retriable.py), unless a subclass says its wait is over (the deadline was
    waited out already) or that it was refused (permanent)."""

    exit_status = ExitStatus.UNREACHABLE
    transient = True
    # What drctl measured of its own wait before it gave up (the retries' first attempt to
    # the last), and the deadline it waited under: the JSON error says both, so a caller
    # judges the wait against the deadline the operator gave, not against a wall clock.
    waited_s: float | None = None
    deadline_s: float | None = None

    def measured(self, waited_s: float | None, deadline_s: float | None) -> Self:
        """This error with the wait it ended (None keeps what it has)."""
        if waited_s is not None:
            self.waited_s = round(waited_s, 3)
        if deadline_s is not None:
            self.deadline_s = deadline_s
        return self

    def measured_as(self, other: BaseException) -> Self:
        """This error with the wait `other` (an Unreachable it stands for) measured."""
        if isinstance(other, Unreachable):
            self.measured(other.waited_s, other.deadline_s)
        return self


class TimedOut(DrctlError):
    """A wait that did not finish in its --timeout while the clusters answered (exit 1; an
    unreachable cluster is Unreachable, exit 4). The message says what was left."""


class Aborted(DrctlError):
    exit_status = ExitStatus.ABORTED


class LabError(DrctlError):
    """The local lab could not do what was asked; the message names the log file to read."""


class DecodeError(ValueError):
    """Bytes that do not decode with a given layout. Not a DrctlError: decoders report it per
    record and carry on; it never ends a command."""
