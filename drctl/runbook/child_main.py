"""The child's side of an action step run in a process of its own (runbook/child.py is the
parent's): one request on stdin, one answer on stdout.

    python -m drctl.runbook.child_main    # what the parent runs; nothing to run by hand
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from drctl.runbook.kinds.interface import AttemptFailed, NotRetried


def _registry(factory: str) -> Any:
    import importlib

    module, _, name = factory.partition(":")
    return getattr(importlib.import_module(module), name)()


def main() -> int:
    """The child: one request on stdin, one answer on stdout."""
    from drctl.config import load_config
    from drctl.runbook.actions import ActionContext
    from drctl.runbook.kinds.action import call_action

    request = json.loads(sys.stdin.read())
    registry = _registry(request["registry"])
    action = registry.get(request["action"])
    loaded: dict[str, Any] = {}

    def config() -> Any:
        if "config" not in loaded:
            loaded["config"] = load_config(Path(request["config"]))
        return loaded["config"]

    def notify(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    answer: dict[str, Any]
    if action is None:
        answer = {"error": {"message": f"unknown action {request['action']}",
                            "retried": False}}
    else:
        ctx = ActionContext(config_loader=config if request.get("config") else None,
                            notify=notify)
        try:
            answer = {"result": call_action(action, request["params"], None, ctx)}
        except AttemptFailed as exc:
            answer = {"error": {"message": exc.message, "hint": exc.hint,
                                "unreachable": exc.unreachable, "retried": True}}
        except NotRetried as exc:
            answer = {"error": {"message": exc.message, "hint": exc.hint, "retried": False}}
    sys.stdout.write(json.dumps(answer, default=str))
    sys.stdout.flush()
    return 0


def run() -> int:
    """main(), SIGTERM ending it as Ctrl-C would (the action's own cleanup runs: a gap job
    interrupted on its server, drctl's temporary files removed), after which the process
    still dies by the signal: the parent reads a step terminated, as before."""
    from drctl.interrupts import Terminated, die_by_sigterm, sigterm_interrupts

    try:
        with sigterm_interrupts():
            return main()
    except Terminated:
        die_by_sigterm()
        raise


if __name__ == "__main__":
    sys.exit(run())
