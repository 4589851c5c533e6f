"""SIGTERM as Ctrl-C: CI cancels a job, systemd stops a unit and a drill terminates a step
with SIGTERM, and Python's default for it ends the process on the spot — no `finally`, so a
gap job went on running on the Spark Connect server and drctl's temporary directory stayed.
Under this handler SIGTERM raises KeyboardInterrupt where the process is, and everything a
command started ends the way Ctrl-C ends it."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process was; caught wherever Ctrl-C is."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise Terminated


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises Terminated (a KeyboardInterrupt) while the block runs (on the main
    thread only, where Python runs signal handlers); the previous handler comes back after
    it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def die_by_sigterm() -> None:
    """End this process as SIGTERM's default would have, once its cleanup ran: whoever
    waits on it (a runbook reading a step's end) still sees the signal."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
