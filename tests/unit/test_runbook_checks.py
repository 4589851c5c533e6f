"""Tolerances, templates and the journal reader: the engine's pure parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drctl.runbook.actions import CoercionError, coerce
from drctl.runbook.checks import ToleranceError, evaluate
from drctl.runbook.journal import Journal, JournalBusy, ResumeRefused, read_journal
from drctl.runbook.model import Tolerance, ToleranceKind
from drctl.runbook.templating import NotRun, Renderer, RenderError, references
from drctl.secrets import Redactor


def holds(kind: str, value: object, expected: object) -> bool:
    return evaluate(Tolerance(ToleranceKind(kind), expected), value, expected)[0]


def test_equals_compares_meaning_not_representation() -> None:
    assert holds("equals", "0", 0) and holds("equals", 0, "0") and holds("equals", 0, 0.0)
    assert holds("equals", "true", True) and holds("equals", True, "yes")
    assert not holds("equals", "1.5", 1) and not holds("equals", None, 0)
    assert not holds("equals", "True!", True) and not holds("equals", "abc", "ABC")
    assert holds("equals", ["a", "b"], ["a", "b"]) and not holds("equals", ["a"], ["b"])


def test_range_one_of_regex() -> None:
    assert holds("range", 3, (1, 3)) and holds("range", "2.5", (None, 3))
    assert not holds("range", 4, (1, 3)) and not holds("range", "many", (0, None))
    assert not holds("range", True, (0, 1))  # a boolean is not a count
    assert holds("range", 10, ("5", "20"))  # bounds rendered from templates arrive as text
    with pytest.raises(ToleranceError):
        holds("range", 1, ("x", 2))
    assert holds("one_of", "RUNNING", ["RUNNING", "PAUSED"]) and holds("one_of", "2", [1, 2])
    assert not holds("one_of", "FAILED", ["RUNNING"])
    assert holds("regex", "4.3.1", r"^\d+\.\d+") and not holds("regex", "x4.3", r"^\d")
    assert not holds("regex", None, ".*")
    with pytest.raises(ToleranceError):
        holds("regex", "x", "(")


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


def test_coercion_of_action_parameters() -> None:
    assert coerce("3", int) == 3 and coerce(3.0, int) == 3 and coerce("yes", bool) is True
    assert coerce(None, int | None) is None and coerce(["1", 2], list[int]) == [1, 2]
    assert coerce(5, str) == "5"
    for value, annotation in (("x", int), (True, int), ("maybe", bool), ("a", list[str])):
        with pytest.raises(CoercionError):
            coerce(value, annotation)


def test_journal_reader_tolerates_a_torn_last_record(tmp_path: Path) -> None:
    journal = tmp_path / "j.jsonl"
    lines = [
        {"type": "run", "version": 1, "run_id": "r1", "digest": "d"},
        {"type": "step-end", "step": "a", "phase": "main", "status": "ok", "completed": True},
        {"type": "step-end", "step": "b", "phase": "main", "status": "failed",
         "completed": False},
    ]
    journal.write_text("\n".join(json.dumps(r) for r in lines) + '\n{"type": "step-st')
    state = read_journal(journal)
    assert list(state.completed) == ["a"] and not state.rolled_back and state.finished is None
    journal.write_text('{"type": "step-end"}\n')
    with pytest.raises(ResumeRefused, match="not a drctl runbook journal"):
        read_journal(journal)
    journal.write_text(json.dumps(lines[0]) + "\nnot json\n" + json.dumps(lines[1]) + "\n")
    with pytest.raises(ResumeRefused, match=":2: not a journal record"):
        read_journal(journal)


def test_journal_drops_a_torn_record_before_appending_and_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"type": "run", "version": 1}\n{"type": "step-st')
    journal = Journal(path, Redactor(["hunter22"]))
    try:
        journal.write({"type": "resume", "note": "password hunter22"})
        with pytest.raises(JournalBusy):
            Journal(path, Redactor())
    finally:
        journal.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["type"] for r in lines] == ["run", "resume"]
    assert lines[1]["note"] == "password ****"
    Journal(path, Redactor()).close()  # the lock ends with the run
