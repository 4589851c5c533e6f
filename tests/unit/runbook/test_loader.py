"""Validation: every problem names file, line and step; the CLI exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from drctl.errors import ExitStatus
from drctl.runbook.loader import RunbookInvalid
from drctl.runbook.model import OnFailureMode, ToleranceKind
from tests.unit.runbook.support import drctl, load, write


def problems(text: str) -> list[str]:
    with pytest.raises(RunbookInvalid) as info:
        load(text, path=Path("rb.yaml"))
    assert info.value.exit_status == ExitStatus.USAGE
    return [str(issue) for issue in info.value.issues]


def test_a_valid_runbook_loads_with_its_parts() -> None:
    runbook = load("""
        name: drill
        inputs:
          target: {description: where to}
          wait: 5s
        steps:
          - name: first
            action: test.echo
            with: {value: "{{ vars.target }}", count: 2}
            retry: {attempts: 3, initial: 500ms, max: 2m, deadline: 1h}
            timeout: 30
            on_failure: rollback
            undo: cleanup
            outputs: [value]
          - name: second
            check: {value: "{{ steps.first.outputs.value }}", one_of: [a, b]}
          - name: pause
            pause: "{{ vars.wait }}"
        rollback:
          - name: cleanup
            shell: echo cleaning
    """)
    first, second, pause = runbook.steps
    assert first.kind == "action" and first.timeout_s == 30
    assert (first.retry.attempts, first.retry.initial_s, first.retry.max_s,
            first.retry.deadline_s) == (3, 0.5, 120, 3600)
    assert first.on_failure.mode == OnFailureMode.rollback and first.undo == ("cleanup",)
    assert second.check is not None and second.check.tolerance.kind == ToleranceKind.one_of
    assert pause.kind == "pause" and not runbook.inputs["target"].has_default
    assert runbook.rollback[0].name == "cleanup" and not runbook.uses_config


def test_problems_name_file_line_and_step() -> None:
    found = problems("""
        steps:
          - name: ok_step
            shell: echo hi
          - name: bad_kind
            sleep: 5
          - name: bad_action
            action: lab.stauts
          - name: missing_var
            shell: echo {{ vars.nope }}
          - name: jinja
            shell: |
              echo first line
              echo {{ vars.x | }}
          - name: bad_regex
            check: {value: x, regex: "(unclosed"}
          - name: bad_range
            check:
              value: 3
              range: [5, 1]
    """)
    expected = [
        "rb.yaml:4: step 'bad_kind': has none of the step kinds",
        "rb.yaml:5: step 'bad_kind': unknown key 'sleep'",
        "rb.yaml:7: step 'bad_action': unknown action 'lab.stauts' (did you mean 'lab.status'?)",
        "rb.yaml:9: step 'missing_var': missing variable 'vars.nope'",
        "rb.yaml:13: step 'jinja': Jinja syntax error",
        "rb.yaml:15: step 'bad_regex': check.regex: not a valid regular expression",
        "rb.yaml:19: step 'bad_range': check.range: min 5 is greater than max 1",
    ]
    assert len(found) == len(expected), found
    for text, prefix in zip(found, expected, strict=True):
        assert text.startswith(prefix), (text, prefix)


def test_references_to_steps_and_outputs_are_checked() -> None:
    found = problems("""
        steps:
          - name: early
            shell: echo "{{ steps.late.outputs.x }}"
          - name: late
            shell: echo hi
            outputs: {x: "{{ result.stdout }}"}
          - name: typo
            shell: echo "{{ steps.late.outputs.y }} {{ steps.nowhere.status }}"
          - name: result_outside_outputs
            shell: echo "{{ result.stdout }}"
          - name: late
            shell: echo again
    """)
    joined = "\n".join(found)
    assert "rb.yaml:3: step 'early': steps.late is not an earlier step" in joined
    assert "step 'typo': steps.late.outputs.y: step 'late' declares no such output " \
           "(declared: x)" in joined
    assert "steps.nowhere: no such step" in joined
    assert "step 'result_outside_outputs': unknown name 'result'" in joined
    assert "rb.yaml:11: step 'late': duplicate step name (first at line 4)" in joined


def test_action_parameters_are_typed() -> None:
    found = problems("""
        steps:
          - name: wrong_type
            action: test.echo
            with: {count: "many", colour: red}
          - name: needs_what
            action: lab.fail
          - name: probe_must_be_read_only
            check: {action: lab.down, value: 1, equals: 1}
    """)
    joined = "\n".join(found)
    assert "rb.yaml:4: step 'wrong_type': action 'test.echo': parameter 'count': expected an " \
           "integer, got 'many'" in joined
    assert "rb.yaml:4: step 'wrong_type': action 'test.echo': unknown parameter 'colour'" \
           in joined
    assert "step 'needs_what': action 'lab.fail': missing required parameter 'what'" in joined
    assert "step 'probe_must_be_read_only': action 'lab.down' changes things" in joined


def test_structure_problems() -> None:
    found = problems("""
        nmae: typo
        inputs:
          approve: yes
        steps:
          - name: two_kinds
            shell: echo
            pause: 1s
          - name: bad-name
            shell: echo
          - name: bad_failure
            shell: echo
            on_failure: retry
            undo: nothing_like_it
          - name: bad_values
            pause: forever
            timeout: 5s
          - name: no_tolerance
            check: {value: 1}
    """)
    joined = "\n".join(found)
    assert "rb.yaml:1: unknown key 'nmae' (did you mean 'name'?)" in joined
    assert "rb.yaml:3: 'approve' is reserved" in joined
    assert "step 'two_kinds': has more than one step kind (shell, pause)" in joined
    assert "rb.yaml:8: step #2 needs a 'name' that is an identifier" in joined
    assert "step 'bad_failure': on_failure must be abort, continue, rollback" in joined
    assert "'nothing_like_it' is not a step of the rollback section" in joined
    assert "step 'bad_values': pause: expected a duration" in joined
    assert "step 'bad_values': 'timeout' does not apply to a pause step" in joined
    assert "step 'no_tolerance': check: give exactly one tolerance" in joined


def test_yaml_syntax_error_has_a_line() -> None:
    found = problems("steps:\n  - name: x\n    shell: [unclosed\n")
    assert len(found) == 1 and found[0].startswith("rb.yaml:4: not valid YAML")


def test_cli_validate_exits_2_with_file_line_and_step(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    rb = write(tmp_path / "broken.yaml", """
        steps:
          - name: fine
            shell: echo ok
          - name: broken
            action: no.such.action
    """)
    assert drctl("runbook", "validate", str(rb)) == ExitStatus.USAGE
    err = capsys.readouterr().err
    assert f"{rb}:5: step 'broken': unknown action 'no.such.action'" in err.replace("\n", "")
    assert "Traceback" not in err
    # The same message stops `run` before anything runs.
    assert drctl("runbook", "run", str(rb), "--journal", str(tmp_path / "j")) == \
        ExitStatus.USAGE
    assert not (tmp_path / "j").exists()


def test_missing_input_value_is_a_usage_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    rb = write(tmp_path / "needs.yaml", """
        inputs:
          target: {description: the cluster to fail over to}
        steps:
          - name: say
            shell: echo "{{ vars.target }}"
    """)
    assert drctl("runbook", "run", str(rb), "--non-interactive") == ExitStatus.USAGE
    err = capsys.readouterr().err
    assert f"{rb}:2: input 'target'" in err and "--var" in err
    # Declared, so validation alone passes.
    assert drctl("runbook", "validate", str(rb)) == ExitStatus.SUCCESS
