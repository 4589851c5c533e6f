"""`drctl runbook list`."""

from __future__ import annotations

from typing import Annotated

from drctl.cli.options import OutputOption
from drctl.cli.state import CURRENT
from drctl.runbook.actions import builtin_registry
from drctl.runbook.loader import load_runbook
from drctl.runbook.shipped import shipped_runbooks
from drctl.terminal import OutputFormat


def list_runbooks(output: Annotated[OutputFormat | None, OutputOption] = None) -> None:
    """The runbooks drctl ships: name one instead of a file.

    \b
    Examples:
      drctl runbook list
      drctl runbook plan failover     # a shipped runbook, by name"""
    term = CURRENT.terminal(output)
    listed = [(name, load_runbook(path, builtin_registry()))
              for name, path in shipped_runbooks().items()]
    if term.json_mode:
        term.emit_json({"runbooks": [
            {"name": name, "path": str(rb.path), "description": rb.description,
             "steps": len(rb.steps), "uses_config": rb.uses_config} for name, rb in listed]})
        return
    term.table("Shipped runbooks", ["runbook", "steps", "description"],
               [[name, len(rb.steps), first_sentence(rb.description)]
                for name, rb in listed])
    term.info("`drctl runbook show NAME` prints a runbook whole.")


def first_sentence(description: str, limit: int = 70) -> str:
    """A runbook's description up to its first full stop, cut at a word near `limit`
    characters: one short line in the list (`show` and `-o json` have it whole)."""
    text = " ".join(description.split())
    head, dot, _ = text.partition(". ")
    head = head + "." if dot else text
    if len(head) <= limit:
        return head
    return head[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"
