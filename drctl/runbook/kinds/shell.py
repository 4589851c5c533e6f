"""`shell:` steps: a command line for `/bin/sh -c`, with `env:` added and an optional `cwd:`.

Its result is `stdout`, `stderr` (trailing newlines removed), `exit_code` and `json` (stdout
parsed when it is JSON). A non-zero exit or a timeout fails the attempt.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from drctl.runbook.child import end_group, start_group
from drctl.runbook.kinds.interface import (
    AttemptFailed,
    StepKindDefinition,
    StepParser,
    StepRunner,
)
from drctl.runbook.model import Step, StepKind
from drctl.runbook.result import Status, StepResult
from drctl.runbook.yaml_lines import LineDict

# Kept in journals and reports per stream: the end of a long output is what explains a failure.
OUTPUT_LIMIT = 64 * 1024


class ShellStep(StepKindDefinition):
    kind = StepKind("shell")
    keys = ("env", "cwd", "until", "timeout", "retry")

    def parse(self, step: Step, raw: LineDict, at: Callable[[str], int],
              parser: StepParser) -> Step:
        command = raw["shell"]
        if not isinstance(command, str) or not command.strip():
            parser.issue(at("shell"), step.name, "'shell' must be a command line")
            command = ""
        return replace(step, command=command,
                       env=parser.mapping(raw.get("env"), at("env"), step.name, "env"),
                       cwd=raw.get("cwd"))

    def inputs(self, step: Step, runner: StepRunner) -> tuple[dict[str, Any], bool]:
        rendered, deferred = runner.render(
            {"command": step.command, "env": dict(step.env), "cwd": step.cwd})
        rendered["env"] = {k: "" if v is None else str(v) for k, v in rendered["env"].items()}
        return rendered, deferred

    def run(self, step: Step, result: StepResult, inputs: dict[str, Any], deferred: bool,
            runner: StepRunner) -> None:
        grace_s = runner.options.kill_grace_s
        outcome = runner.attempts(step, result, lambda: runner.until(
            step, _run_shell(inputs, step.timeout_s, grace_s)))
        if result.status == Status.ok:
            runner.outputs(step, result, {"result": outcome})


def _tail(text: str) -> str:
    if len(text) <= OUTPUT_LIMIT:
        return text
    return f"[... {len(text) - OUTPUT_LIMIT} characters cut ...]\n" + text[-OUTPUT_LIMIT:]


def _run_shell(inputs: Mapping[str, Any], timeout_s: float | None,
               grace_s: float) -> dict[str, Any]:
    env = {**os.environ, **inputs["env"]}
    cwd = str(inputs["cwd"]) if inputs.get("cwd") else None
    try:
        # A session of its own: a timeout kills the whole process group, children too.
        proc = start_group(["/bin/sh", "-c", str(inputs["command"])], grace_s, cwd=cwd,
                           env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    except OSError as exc:
        raise AttemptFailed(f"cannot start the shell: {exc}") from exc
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _end(proc, grace_s)
        raise AttemptFailed(f"timed out after {timeout_s:g} s; its process group was "
                            "killed") from None
    except BaseException:
        _end(proc, grace_s)
        raise
    stdout = _tail(out.decode(errors="replace")).rstrip("\n")
    stderr = _tail(err.decode(errors="replace")).rstrip("\n")
    if proc.returncode != 0:
        last = (stderr or stdout).strip().splitlines()[-3:]
        raise AttemptFailed(f"exit status {proc.returncode}"
                            + (": " + " / ".join(last) if last else ""))
    parsed: Any = None
    if stdout.strip()[:1] in ("{", "["):
        try:
            parsed = json.loads(stdout)
        except ValueError:
            parsed = None
    return {"stdout": stdout, "stderr": stderr, "exit_code": proc.returncode, "json": parsed}


def _end(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    end_group(proc, grace_s)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
