"""Prompts that never hang a pipeline: no TTY, `CI` set or --yes means no prompt."""

from __future__ import annotations

import os
import sys

import typer

from drctl.errors import Aborted


def interactive() -> bool:
    return sys.stdin.isatty() and not os.environ.get("CI")


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
