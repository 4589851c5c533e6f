"""Prompts that never hang a pipeline: no TTY, `CI` set or --yes means no prompt."""

from __future__ import annotations

import os
import sys

import typer

from drctl.errors import Aborted

# CI systems set CI=true; people sometimes export CI=false or CI=0 to say "not CI".
_NOT_CI = ("", "0", "false", "no")


def interactive() -> bool:
    """Whether a person can answer: stdin is a terminal and `CI` is unset or false-ish."""
    return sys.stdin.isatty() and os.environ.get("CI", "").strip().lower() in _NOT_CI


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
