"""Work started now and awaited later: waiting for one cluster's answers while the command
does something else."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def in_background(call: Callable[[], T], name: str = "drctl-background") -> Callable[[], T]:
    """Start `call` on a daemon thread (an error elsewhere never waits for it to end); the
    function returned waits for its result, or raises what it raised."""
    box: dict[str, T] = {}
    failed: list[BaseException] = []

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
            failed.append(exc)

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()

    def result() -> T:
        worker.join()
        if failed:
            raise failed[0]
        return box["result"]
    return result
