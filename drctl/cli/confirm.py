"""Prompts that never hang a pipeline: no TTY, `CI` set or --yes means no prompt."""

from __future__ import annotations

import os
import sys

import typer

from drctl.errors import Aborted
from drctl.yesno import bool_from_text


def interactive() -> bool:
    """Whether a person can answer: stdin is a terminal and `CI` is unset or a "no" word.

    CI systems set CI=true (or a name); people export CI=false or CI=0 to say "not CI"."""
    ci = os.environ.get("CI", "")
    return sys.stdin.isatty() and (not ci.strip() or bool_from_text(ci) is False)


def confirm_or_abort(question: str, *, yes: bool, how: str = "pass --yes") -> None:
    if yes:
        return
    if not interactive():
        raise Aborted(f"Not confirmed: {question}", f"This is non-interactive; {how}.")
    if not typer.confirm(question, default=False, err=True):
        raise Aborted("Aborted by the operator.")


def operator_confirms(text: str) -> bool:
    """For manual steps: print what to do, wait for a yes (never in CI)."""
    if not interactive():
        return False
    typer.echo(text, err=True)
    return typer.confirm("Done?", default=False, err=True)
