"""Did-you-mean suggestions (drctl/suggest.py), as a hint and as an aside."""

from __future__ import annotations

from drctl.suggest import did_you_mean, did_you_mean_aside


def test_did_you_mean_as_hint_and_as_aside() -> None:
    assert did_you_mean("clustres", ["clusters", "state"]) == "Did you mean 'clusters'?"
    assert did_you_mean("zzz", ["clusters"]) is None
    assert did_you_mean_aside("stpes", ("steps", "name")) == " (did you mean 'steps'?)"
    assert did_you_mean_aside("zzz", ("steps",)) == ""
