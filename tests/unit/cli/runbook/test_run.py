"""`drctl runbook` through the real CLI boundary: approvals, secrets, JSON, JUnit, reports."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from drctl.errors import ExitStatus
from tests.unit.runbook.support import drctl, write

GATED = """
    steps:
      - name: before
        shell: echo before
      - name: go_ahead
        approval: Promote the secondary?
      - name: after
        shell: echo after
"""


def test_approval_in_non_interactive_mode_fails_clearly_with_exit_5(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb = write(tmp_path / "gated.yaml", GATED)
    journal = tmp_path / "j.jsonl"
    assert drctl("runbook", "run", str(rb), "--non-interactive",
                 "--journal", str(journal)) == ExitStatus.ABORTED
    err = capsys.readouterr().err.replace("\n", " ")
    assert "approval required: Promote the secondary?" in err
    assert "--yes" in err and "--var approve.go_ahead=yes" in err
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [r["step"] for r in records if r["type"] == "step-end"] == ["before", "go_ahead"]
    assert records[-1] == {**records[-1], "type": "run-end", "status": "aborted",
                           "exit_status": 5}


@pytest.mark.parametrize("approve", [["--yes"], ["--var", "approve.go_ahead=yes"]])
def test_approval_given_up_front_passes(tmp_path: Path, approve: list[str],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    rb = write(tmp_path / "gated.yaml", GATED)
    assert drctl("runbook", "run", str(rb), "--journal", str(tmp_path / "j"), "-o", "json",
                 *approve) == ExitStatus.SUCCESS
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "succeeded" and data["exit_status"] == 0
    assert [s["status"] for s in data["steps"]] == ["ok", "ok", "ok"]
    assert data["steps"][1]["approved_by"] in ("--yes", "--var approve.go_ahead")


def test_ci_environment_never_prompts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    rb = write(tmp_path / "gated.yaml", GATED)
    assert drctl("runbook", "run", str(rb), "--journal", str(tmp_path / "j")) == \
        ExitStatus.ABORTED


def test_a_secret_by_reference_never_reaches_journal_json_junit_or_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    config_secret = "cfg-Pa55w0rd-from-env"
    var_secret = "api-T0ken-by-reference"
    literal_secret = "literal-s3cret-marked"
    monkeypatch.setenv("RB_TEST_KAFKA_PASSWORD", config_secret)
    monkeypatch.setenv("RB_TEST_API_TOKEN", var_secret)
    config = write(tmp_path / "drctl.yaml", """
        clusters:
          primary:
            bootstrap.servers: 127.0.0.1:9
            sasl.password: ${env:RB_TEST_KAFKA_PASSWORD}
    """)
    rb = write(tmp_path / "secrets.yaml", """
        inputs:
          api_token: "${env:RB_TEST_API_TOKEN}"
          shared: {secret: true}
        steps:
          - name: show_config
            shell: echo "{{ config.clusters.primary['bootstrap.servers'] }} $RB_TEST_KAFKA_PASSWORD"
            outputs: {line: "{{ result.stdout }}"}
          - name: use_token
            shell: echo "token=$TOKEN shared={{ vars.shared }}"
            env: {TOKEN: "{{ vars.api_token }}"}
            outputs: {said: "{{ result.stdout }}", json_like: "{{ result }}"}
          - name: fail_loudly
            shell: echo "bad {{ vars.shared }} {{ vars.api_token }}" >&2; exit 1
            on_failure: continue
          - name: check_it
            check:
              value: "{{ vars.api_token }}"
              equals: "not-{{ vars.shared }}"
            on_failure: continue
          - name: gate
            approval: Use {{ vars.api_token }} and {{ vars.shared }}?
    """)
    journal = tmp_path / "j.jsonl"
    junit = tmp_path / "junit.xml"
    reports, plan_reports = tmp_path / "reports", tmp_path / "plan-reports"
    status = drctl("--config", str(config), "runbook", "run", str(rb), "--var",
                   f"shared={literal_secret}", "--journal", str(journal), "--junit",
                   str(junit), "--report-dir", str(reports), "-o", "json", "--yes")
    captured = capsys.readouterr()
    assert status == ExitStatus.FAILURE
    assert drctl("--config", str(config), "runbook", "run", str(rb), "--var",
                 f"shared={literal_secret}", "--resume", str(journal), "--report-dir",
                 str(reports), "--yes") == ExitStatus.USAGE  # resuming a finished run is refused...
    captured_again = capsys.readouterr()
    assert drctl("--config", str(config), "runbook", "plan", str(rb), "--var",
                 f"shared={literal_secret}", "--report-dir", str(plan_reports)) == \
        ExitStatus.CHECK_FAILED
    plan = capsys.readouterr()
    data = json.loads(captured.out)
    (md,) = reports.glob("secrets-*.md")
    assert sorted(data["reports"]) == sorted(str(md.with_suffix(ext))
                                             for ext in (".md", ".html", ".json"))
    (html,) = plan_reports.glob("secrets-*.html")
    # The steps really ran with the real values...
    assert data["steps"][0]["outputs"]["line"] == "127.0.0.1:9 ****"
    assert data["steps"][1]["outputs"]["said"] == "token=**** shared=****"
    assert data["steps"][3]["status"] == "check-failed"
    # ...and no secret appears anywhere drctl wrote.
    written = {
        "journal": journal.read_text(), "json": captured.out, "junit": junit.read_text(),
        "markdown": md.read_text(), "html": html.read_text(),
        "report json": md.with_suffix(".json").read_text(),
        "stderr": captured.err + captured_again.err + plan.err, "plan stdout": plan.out,
    }
    for name, text in written.items():
        for secret in (config_secret, var_secret, literal_secret):
            assert secret not in text, f"{secret} leaked into the {name}"
    assert "****" in written["journal"] and "****" in written["markdown"]


def test_junit_has_one_case_per_step_with_failures_and_skips(tmp_path: Path) -> None:
    rb = write(tmp_path / "ci.yaml", """
        steps:
          - name: passes
            shell: echo fine
          - name: wrong_value
            check: {value: 3, range: [0, 1]}
            on_failure: continue
          - name: broken
            shell: exit 9
          - name: never
            shell: echo never
    """)
    junit = tmp_path / "out" / "junit.xml"
    assert drctl("runbook", "run", str(rb), "--junit", str(junit), "--journal",
                 str(tmp_path / "j")) == ExitStatus.FAILURE
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "4"
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("1", "1", "1")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == ["passes", "wrong_value", "broken", "never"]
    assert cases["passes"].find("failure") is None and cases["passes"].find("error") is None
    failure = cases["wrong_value"].find("failure")
    assert failure is not None and "3 is not within [0, 1]" in (failure.get("message") or "")
    error = cases["broken"].find("error")
    assert error is not None and error.get("message") == "exit status 9"
    assert cases["never"].find("skipped") is not None


def test_html_report_is_escaped_and_markdown_lists_steps(tmp_path: Path) -> None:
    rb = write(tmp_path / "html.yaml", """
        description: Checks <b>things</b>
        steps:
          - name: evil
            shell: echo '<script>alert(1)</script>'
            outputs: {said: "{{ result.stdout }}"}
    """)
    assert drctl("runbook", "run", str(rb), "--report-dir", str(tmp_path / "r"), "--journal",
                 str(tmp_path / "j")) == 0
    (html,) = (tmp_path / "r").glob("html-*.html")
    text = html.read_text()
    assert "<script>alert" not in text and "&lt;script&gt;alert(1)" in text
    assert "&lt;b&gt;things" in text
    report = html.with_suffix(".md").read_text()
    assert "# Runbook `html` — succeeded" in report and "| 1 | `evil` | main | shell | ok" \
        in report


def test_the_old_report_option_still_writes_its_one_file_with_a_warning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--report PATH (.md or .html) before --report-dir DIR: hidden for a release."""
    rb = write(tmp_path / "old.yaml", """
        steps:
          - name: hello
            shell: echo hello
    """)
    md = tmp_path / "r.md"
    assert drctl("runbook", "run", str(rb), "--report", str(md), "--journal",
                 str(tmp_path / "j")) == 0
    assert md.read_text().startswith("# Runbook `old` — succeeded")
    assert [p.name for p in tmp_path.glob("r.*")] == ["r.md"]
    err = " ".join(capsys.readouterr().err.split())
    assert "--report is now --report-dir (a directory: NAME-RUN_ID.md, .html and .json)" in err
    assert drctl("runbook", "run", str(rb), "--report", str(tmp_path / "r.pdf")) == \
        ExitStatus.USAGE
    assert drctl("runbook", "run", str(rb), "--report", str(md), "--report-dir",
                 str(tmp_path)) == ExitStatus.USAGE
    assert "--report is the old name of --report-dir" in capsys.readouterr().err


def test_plan_prints_resolved_values_and_writes_no_journal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rb = write(tmp_path / "plan.yaml", """
        inputs: {target: secondary}
        steps:
          - name: switch
            shell: echo "switching to {{ vars.target }}" > switched
    """)
    assert drctl("runbook", "plan", str(rb), "--var", "target=dr-site") == 0
    err = capsys.readouterr().err
    assert 'switching to dr-site' in err and "planned" in err
    assert not (tmp_path / "switched").exists() and not (tmp_path / ".drctl").exists()
    assert drctl("runbook", "run", str(rb), "--dry-run", "-o", "json") == 0
    assert json.loads(capsys.readouterr().out)["status"] == "planned"
    assert not (tmp_path / "switched").exists()


def test_vars_file_and_var_precedence(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    rb = write(tmp_path / "vars.yaml", """
        inputs: {a: default-a, b: default-b, c: default-c}
        steps:
          - name: show
            shell: echo "{{ vars.a }} {{ vars.b }} {{ vars.c }} {{ vars.extra.deep }}"
            outputs: {line: "{{ result.stdout }}"}
    """)
    vf = write(tmp_path / "vars-file.yaml", "b: file-b\nc: file-c\nextra: {deep: 1}\n")
    assert drctl("runbook", "run", str(rb), "--vars-file", str(vf), "--var", "c=cli-c",
                 "--var", "extra.deep=2", "-o", "json", "--journal", str(tmp_path / "j")) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["steps"][0]["outputs"]["line"] == "default-a file-b cli-c 2"
    assert drctl("runbook", "run", str(rb), "--var", "no-equals-sign") == ExitStatus.USAGE


def test_default_journal_goes_under_the_state_dir(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    rb = write(tmp_path / "tiny.yaml", "steps:\n  - name: hi\n    shell: echo hi\n")
    assert drctl("runbook", "run", str(rb)) == 0
    journals = list((tmp_path / ".drctl" / "runbooks").glob("tiny-*.jsonl"))
    assert len(journals) == 1
    assert json.loads(journals[0].read_text().splitlines()[-1])["status"] == "succeeded"


def test_junit_parses_after_a_step_prints_colours_and_control_characters(
        tmp_path: Path) -> None:
    rb = write(tmp_path / "colours.yaml", r"""
        steps:
          - name: coloured
            shell: printf '\033[1;31mred\033[0m bell\007 done\n'; exit 1
    """)
    junit = tmp_path / "junit.xml"
    assert drctl("runbook", "run", str(rb), "--junit", str(junit), "--journal",
                 str(tmp_path / "j")) == ExitStatus.FAILURE
    raw = junit.read_text(encoding="utf-8")
    assert "\x1b" not in raw and "\x07" not in raw
    suite = ET.fromstring(raw.encode())  # parses: no character XML 1.0 forbids
    text = "".join(suite.itertext())
    assert "red bell\\x07 done" in text  # colours dropped, the bell shown, the words kept
