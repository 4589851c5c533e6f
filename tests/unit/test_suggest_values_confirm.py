"""The one rule each for suggestions, runbook yes/no values and "can we prompt"."""

from __future__ import annotations

import pytest

from drctl.cli import confirm
from drctl.runbook.values import is_truthy
from drctl.suggest import did_you_mean, did_you_mean_aside
from drctl.yesno import bool_from_text


def test_did_you_mean_as_hint_and_as_aside() -> None:
    assert did_you_mean("clustres", ["clusters", "state"]) == "Did you mean 'clusters'?"
    assert did_you_mean("zzz", ["clusters"]) is None
    assert did_you_mean_aside("stpes", ("steps", "name")) == " (did you mean 'steps'?)"
    assert did_you_mean_aside("zzz", ("steps",)) == ""


def test_yes_no_words_and_conditions() -> None:
    assert [bool_from_text(t) for t in ("Yes", " on ", "0", "off", "maybe")] == [
        True, True, False, False, None]
    assert not is_truthy("None") and not is_truthy("") and is_truthy("maybe")


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
