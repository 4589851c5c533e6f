"""Whether drctl may prompt (drctl/cli/confirm.py): on a terminal, unless CI says no."""

from __future__ import annotations

import pytest

from drctl.cli import confirm


@pytest.mark.parametrize(("ci", "expected"), [
    (None, True), ("", True), ("0", True), ("false", True), ("No", True),
    ("true", False), ("1", False), ("github", False)])
def test_interactive_on_a_tty_unless_ci(monkeypatch: pytest.MonkeyPatch, ci: str | None,
                                        expected: bool) -> None:
    monkeypatch.setattr(confirm.sys.stdin, "isatty", lambda: True)
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    assert confirm.interactive() is expected


def test_never_interactive_without_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confirm.sys.stdin, "isatty", lambda: False)
    monkeypatch.delenv("CI", raising=False)
    assert confirm.interactive() is False
