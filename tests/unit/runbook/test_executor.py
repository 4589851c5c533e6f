"""The runbook engine without Kafka: shell, check, pause and test-only actions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from drctl.errors import ExitStatus, Unreachable
from drctl.runbook.result import RunStatus, Status
from tests.unit.runbook.support import gone, registry_with_test_actions, run


def statuses(result: Any) -> dict[str, str]:
    return {s.name: s.status.value for s in result.steps}


def test_outputs_flow_between_steps_with_native_types() -> None:
    calls: list[dict[str, Any]] = []
    result = run("""
        inputs:
          who: world
        steps:
          - name: produce
            shell: |
              echo '{"lag": 0, "topics": ["a", "b"]}'
            outputs:
              lag: "{{ result.json.lag }}"
              topics: "{{ result.json.topics }}"
              line: "{{ result.stdout }}"
          - name: use
            action: test.echo
            with:
              value: "{{ vars.who }} has {{ steps.produce.outputs.topics | length }} topics"
              count: "{{ steps.produce.outputs.lag + 21 }}"
              tags: "{{ steps.produce.outputs.topics }}"
            outputs: [doubled, value]
          - name: lag_zero
            check:
              value: "{{ steps.produce.outputs.lag }}"
              equals: 0
    """, registry=registry_with_test_actions(calls))
    assert result.status == RunStatus.succeeded and result.exit_status == ExitStatus.SUCCESS
    assert calls == [{"value": "world has 2 topics", "count": 21, "tags": ["a", "b"]}]
    use = result.steps[1]
    assert use.outputs == {"doubled": 42, "value": "world has 2 topics"}
    assert result.steps[0].outputs["topics"] == ["a", "b"]
    assert result.steps[0].outputs["line"] == '{"lag": 0, "topics": ["a", "b"]}'


def test_retry_backs_off_exponentially_and_is_time_scaled() -> None:
    slept: list[float] = []
    calls: list[dict[str, Any]] = []
    result = run("""
        steps:
          - name: flaky
            action: test.flaky
            with: {succeed_on: 4}
            retry: {attempts: 6, initial: 2s, multiplier: 3, max: 10s}
    """, registry=registry_with_test_actions(calls), sleep=slept.append, time_scale=0.5)
    assert result.status == RunStatus.succeeded
    assert result.steps[0].attempts == 4
    # 2 s, 6 s, 18 s capped at 10 s, each scaled by 0.5.
    assert slept == [1.0, 3.0, 5.0]


def test_retry_true_uses_debeziums_defaults_until_exhausted() -> None:
    slept: list[float] = []
    result = run("""
        steps:
          - name: never
            shell: exit 1
            retry: true
    """, sleep=slept.append)
    step = result.steps[0]
    assert step.status == Status.failed and step.attempts == 16
    assert slept[:8] == [1, 2, 4, 8, 16, 32, 64, 120] and len(slept) == 15
    assert "after 16 attempts" in (step.error or "")
    assert result.exit_status == ExitStatus.FAILURE


def test_retry_until_a_check_holds_refetches_the_value() -> None:
    calls: list[dict[str, Any]] = []
    slept: list[float] = []
    result = run("""
        steps:
          - name: lag_drains
            check:
              action: test.probe
              with: {target: 3}
              value: "{{ result.lag }}"
              equals: 0
            retry: {attempts: 5, initial: 1s}
            outputs: {final: "{{ value }}"}
    """, registry=registry_with_test_actions(calls), sleep=slept.append)
    step = result.steps[0]
    assert step.status == Status.ok and step.attempts == 3
    assert step.outputs == {"final": 0}
    assert slept == [1.0, 2.0]


def test_until_retries_an_action_until_its_result_satisfies_the_condition() -> None:
    calls: list[dict[str, Any]] = []
    result = run("""
        steps:
          - name: wait_for_zero
            action: test.probe
            with: {target: 2}
            until: "{{ result.lag == 0 }}"
            retry: {attempts: 4, initial: 10ms}
    """, registry=registry_with_test_actions(calls), time_scale=0.0)
    assert result.steps[0].status == Status.ok and result.steps[0].attempts == 2
    failing = run("""
        steps:
          - name: never_zero
            action: test.probe
            with: {target: 100}
            until: "{{ result.lag == 0 }}"
            retry: {attempts: 3, initial: 10ms}
    """, time_scale=0.0)
    assert failing.steps[0].status == Status.failed
    assert "condition not met" in (failing.steps[0].error or "")


def test_hanging_shell_step_is_killed_with_its_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    result = run(f"""
        steps:
          - name: hang
            shell: |
              sleep 600 &
              echo $! > {pidfile}
              wait
            timeout: 1s
          - name: after
            shell: "true"
    """, kill_grace_s=0.5)
    assert statuses(result) == {"hang": "failed", "after": "not-run"}
    assert "timed out after 1 s" in (result.steps[0].error or "")
    # Ended by its timeout, not by the background `sleep 600` it waited on.
    assert result.steps[0].duration_s < 300, result.steps[0].duration_s
    # The background `sleep` was in the step's process group: it must be gone too.
    assert gone(int(pidfile.read_text()))


def test_action_timeout_fails_the_step_without_retrying() -> None:
    calls: list[dict[str, Any]] = []
    result = run("""
        steps:
          - name: stuck
            action: test.hang
            with: {seconds: 5}
            timeout: 200ms
            retry: 3
    """, registry=registry_with_test_actions(calls), time_scale=0.0)
    step = result.steps[0]
    assert step.status == Status.failed and step.attempts == 1
    assert "timed out" in (step.error or "") and "not retried" in (step.error or "")
    assert len(calls) == 1


def test_failed_check_fails_the_run_with_exit_3() -> None:
    result = run("""
        steps:
          - name: measure
            shell: echo 7
            outputs: {lag: "{{ result.stdout | int }}"}
          - name: lag_small
            check:
              value: "{{ steps.measure.outputs.lag }}"
              range: {max: 5}
          - name: never
            shell: "true"
    """)
    assert result.status == RunStatus.check_failed
    assert result.exit_status == ExitStatus.CHECK_FAILED
    assert statuses(result) == {"measure": "ok", "lag_small": "check-failed", "never": "not-run"}
    assert "7 is not within [-inf, 5]" in (result.steps[1].error or "")


def test_continue_on_failure_runs_later_steps_but_the_run_still_fails() -> None:
    result = run("""
        steps:
          - name: optional
            shell: exit 2
            on_failure: continue
          - name: check_wrong
            check: {value: "abc", regex: "^x"}
            on_failure: continue
          - name: later
            shell: echo done
    """)
    assert statuses(result) == {"optional": "failed", "check_wrong": "check-failed",
                                "later": "ok"}
    assert result.exit_status == ExitStatus.FAILURE


def test_rollback_undoes_what_was_attempted_newest_first(tmp_path: Path) -> None:
    log = tmp_path / "log"
    result = run(f"""
        steps:
          - name: one
            shell: echo one >> {log}
            undo: undo_one
          - name: skipped
            shell: echo skipped >> {log}
            when: false
            undo: undo_skipped
          - name: two
            shell: echo two >> {log}; exit 1
            undo: undo_two
            on_failure: rollback
          - name: three
            shell: echo three >> {log}
            undo: undo_three
        rollback:
          - name: undo_one
            shell: echo undo_one >> {log}
          - name: undo_two
            shell: echo undo_two >> {log}
          - name: undo_skipped
            shell: echo undo_skipped >> {log}
          - name: undo_three
            shell: echo undo_three >> {log}
    """)
    assert log.read_text().split() == ["one", "two", "undo_two", "undo_one"]
    assert [(s.name, s.phase.value, s.status.value) for s in result.steps] == [
        ("one", "main", "ok"), ("skipped", "main", "skipped"), ("two", "main", "failed"),
        ("three", "main", "not-run"), ("undo_two", "rollback", "ok"),
        ("undo_one", "rollback", "ok")]
    assert result.exit_status == ExitStatus.FAILURE
    assert "rolled back" in (result.hint or "")


def test_on_failure_can_name_the_rollback_steps(tmp_path: Path) -> None:
    log = tmp_path / "log"
    result = run(f"""
        steps:
          - name: broken
            check: {{value: 1, equals: 2}}
            on_failure: {{rollback: [notify, restore]}}
        rollback:
          - name: restore
            shell: echo restore >> {log}
          - name: notify
            shell: echo notify >> {log}
    """)
    assert log.read_text().split() == ["notify", "restore"]
    assert result.exit_status == ExitStatus.CHECK_FAILED


def test_pause_is_time_scaled() -> None:
    slept: list[float] = []
    result = run("""
        steps:
          - name: settle
            pause: 2m
    """, sleep=slept.append, time_scale=0.001)
    assert result.status == RunStatus.succeeded and slept == [0.12]


def test_plan_runs_checks_but_no_actions_or_shell(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []
    marker = tmp_path / "ran"
    result = run(f"""
        inputs: {{expected: 0}}
        steps:
          - name: act
            action: test.echo
            with: {{value: "x"}}
            outputs: [value]
          - name: sh
            shell: touch {marker}
          - name: probe_check
            check:
              action: test.probe
              value: "{{{{ result.lag }}}}"
              equals: "{{{{ vars.expected }}}}"
          - name: deferred_check
            check:
              value: "{{{{ steps.act.outputs.value }}}}"
              equals: x
          - name: wrong
            check: {{value: 1, one_of: [2, 3]}}
          - name: gate
            approval: Really?
    """, registry=registry_with_test_actions(calls), dry_run=True)
    assert not marker.exists()
    assert calls == [{"probe": True}]  # only the check's read-only probe ran
    assert statuses(result) == {"act": "planned", "sh": "planned", "probe_check": "ok",
                                "deferred_check": "deferred", "wrong": "check-failed",
                                "gate": "planned"}
    assert result.steps[0].inputs == {"action": "test.echo", "with": {"value": "x"}}
    assert "steps.act.outputs.value" in str(result.steps[3].inputs["value"])
    assert result.exit_status == ExitStatus.CHECK_FAILED


def test_approval_gate_without_a_way_to_ask_aborts_with_exit_5(tmp_path: Path) -> None:
    marker = tmp_path / "after"
    text = f"""
        steps:
          - name: go
            approval: Fail over now?
          - name: after
            shell: touch {marker}
    """
    missing = run(text)
    assert missing.status == RunStatus.aborted and missing.exit_status == ExitStatus.ABORTED
    assert "--yes" in (missing.hint or "") and "approve.go=yes" in (missing.hint or "")
    assert not marker.exists()
    assert run(text, assume_yes=True).status == RunStatus.succeeded
    marker.unlink()
    approved = run(text, assignments=["approve.go=yes"])
    assert approved.steps[0].approved_by == "--var approve.go"
    declined = run(text, prompt=lambda question: False)
    assert declined.steps[0].status == Status.declined
    assert declined.exit_status == ExitStatus.ABORTED
    asked: list[str] = []
    marker.unlink()
    run(text, prompt=lambda question: asked.append(question) or True)
    assert asked == ["Fail over now?"] and marker.exists()


def test_when_skips_and_a_skipped_steps_outputs_fail_clearly() -> None:
    result = run("""
        inputs: {mode: planned}
        steps:
          - name: only_unplanned
            shell: echo hi
            when: "{{ vars.mode == 'unplanned' }}"
            outputs: {said: "{{ result.stdout }}"}
          - name: uses_it
            shell: echo "{{ steps.only_unplanned.outputs.said }}"
    """)
    assert statuses(result) == {"only_unplanned": "skipped", "uses_it": "failed"}
    assert "cannot render" in (result.steps[1].error or "")
    assert "said" in (result.steps[1].error or "")


def test_shell_step_env_and_failure_message() -> None:
    result = run("""
        inputs: {name: drill}
        steps:
          - name: env
            shell: echo "$RUN_NAME"; echo oops >&2; exit 4
            env: {RUN_NAME: "{{ vars.name }}"}
    """)
    assert result.steps[0].error == "exit status 4: oops"
    assert os.environ.get("RUN_NAME") is None


def test_a_failed_check_shows_the_error_its_probe_saw() -> None:
    """`target_reachable: expected True, got False` alone hides the cause: the probe's result
    holds it (a cluster that refused the connection) and the failure says it."""
    registry = registry_with_test_actions()

    def status(ctx: Any) -> dict[str, Any]:
        return {"clusters": {"primary": {"reachable": True},
                             "secondary": {"reachable": False,
                                           "error": "connection refused at 127.0.0.1:29092"}}}

    registry.register("test.status", status, read_only=True)
    result = run("""
        steps:
          - name: target_reachable
            check:
              action: test.status
              value: "{{ result.clusters.secondary.reachable }}"
              equals: true
    """, registry=registry)
    step = result.steps[0]
    assert step.status == Status.check_failed
    assert "clusters.secondary: connection refused at 127.0.0.1:29092" in (step.error or "")


def test_a_check_whose_probe_could_not_reach_a_cluster_is_unknown_exit_4() -> None:
    """`target_reachable: expected True, got False` because the target did not answer is not
    a check that did not hold (3) but a cluster that did not answer (4), as every command
    says it — in a plan too."""
    registry = registry_with_test_actions()

    def status(ctx: Any) -> dict[str, Any]:
        return {"clusters": {"secondary": {"reachable": False, "error": "connection refused"}},
                "unreachable": ["secondary"]}

    registry.register("test.status", status, read_only=True)
    text = """
        steps:
          - name: target_reachable
            check:
              action: test.status
              value: "{{ result.clusters.secondary.reachable }}"
              equals: true
          - name: later
            shell: "true"
    """
    for dry_run in (True, False):
        result = run(text, registry=registry, dry_run=dry_run)
        assert result.steps[0].status == Status.unreachable
        assert "connection refused" in (result.steps[0].error or "")
        assert result.status == RunStatus.unreachable
        assert result.exit_status == ExitStatus.UNREACHABLE


def test_an_action_that_could_not_reach_a_cluster_ends_the_run_with_exit_4() -> None:
    registry = registry_with_test_actions()

    def down(ctx: Any) -> dict[str, Any]:
        raise Unreachable("cluster 'secondary' at 127.0.0.1:1 did not answer")

    registry.register("test.down", down)
    result = run("""
        steps:
          - name: move
            action: test.down
          - name: never
            shell: "true"
    """, registry=registry)
    assert statuses(result) == {"move": "unreachable", "never": "not-run"}
    assert result.exit_status == ExitStatus.UNREACHABLE
    assert "did not answer" in (result.reason or "")
