"""Yes/no words (drctl/yesno.py), and runbook conditions beside them."""

from __future__ import annotations

from drctl.runbook.values import is_truthy
from drctl.yesno import bool_from_text


def test_yes_no_words_and_conditions() -> None:
    assert [bool_from_text(t) for t in ("Yes", " on ", "0", "off", "maybe")] == [
        True, True, False, False, None]
    assert not is_truthy("None") and not is_truthy("") and is_truthy("maybe")
