"""Suggestions for names to type instead: one closeness rule for mistyped config keys, runbook
keys and actions, and one sentence for an old spelling kept for a release (a CLI option, a
runbook action's parameter).

Two spellings of the same question, because a hint stands alone and an aside sits inside a
message: `ConfigError(..., hint="Did you mean 'x'?")` and "unknown key 'y' (did you mean 'x'?)".
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def _closest(word: str, choices: Iterable[object]) -> str | None:
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[object]) -> str | None:
    """A hint naming the closest choice ("Did you mean 'x'?"), or None when none is close."""
    close = _closest(word, choices)
    return f"Did you mean '{close}'?" if close else None


def did_you_mean_aside(word: str, choices: Iterable[object]) -> str:
    """The same as an aside to append to a message (" (did you mean 'x'?)"), or ""."""
    close = _closest(word, choices)
    return f" (did you mean '{close}'?)" if close else ""


def renamed_note(old: str, new: str) -> str:
    """What an old spelling says when it is used: the new one, and that the old goes."""
    return f"{old} is now {new}; the old name goes in the next release."
