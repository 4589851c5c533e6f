"""Templates in runbooks (drctl/runbook/templating.py): single expressions keep their
type, a plan defers what has not run, references are found statically."""

from __future__ import annotations

import pytest

from drctl.runbook.templating import NotRun, Renderer, RenderError, references


def test_single_expressions_keep_their_type_and_text_renders() -> None:
    renderer = Renderer()
    ctx = {"vars": {"n": 3, "names": ["a", "b"]}, "steps": {}}
    assert renderer.render("{{ vars.n * 2 }}", ctx) == (6, False)
    assert renderer.render("{{ vars.names }}", ctx) == (["a", "b"], False)
    assert renderer.render("n={{ vars.n }}", ctx) == ("n=3", False)
    assert renderer.render({"a": ["{{ vars.n }}", "x"]}, ctx) == ({"a": [3, "x"]}, False)
    assert renderer.render('{{ "[1, 2]" | from_json }}', ctx) == ([1, 2], False)
    with pytest.raises(RenderError, match="undefined"):
        renderer.render("{{ vars.missing }}", ctx)
    with pytest.raises(RenderError):
        renderer.render("{{ 'x' | from_json }}", ctx)


def test_plan_defers_only_outputs_of_steps_that_did_not_run() -> None:
    renderer = Renderer(plan=True)
    ctx = {"vars": {}, "steps": {"act": NotRun("act", "planned"),
                                 "ran": {"status": "ok", "outputs": {"x": 1}}}}
    value, deferred = renderer.render("{{ steps.act.outputs.lag }}", ctx)
    assert deferred and "steps.act.outputs.lag" in str(value)
    assert renderer.render("{{ steps.act.outputs.lag > 0 }}", ctx)[1] is True
    assert renderer.render("{{ steps.ran.outputs.x + 1 }}", ctx) == (2, False)
    with pytest.raises(RenderError):
        renderer.render("{{ steps.ran.outputs.typo }}", ctx)


def test_references_are_found_statically() -> None:
    refs = references("{{ vars.a }} {{ vars['b'] }} {{ steps.s.outputs.o }} "
                      "{% for x in config.clusters %}{{ x }}{% endfor %}")
    assert refs.variables == {"a", "b"}
    assert ("steps", "s", "outputs", "o") in refs.steps
    assert refs.names == {"vars", "steps", "config"}
