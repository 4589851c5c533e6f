"""JUnit XML of a run, for CI dashboards: one test suite per run, one test case per step,
and one per objective of the run's scorecard (a missed objective is a failure, one that could
not be measured is skipped).

Made from `RunResult.as_dict`, which is already redacted: the XML cannot show a secret the
run's Redactor knows.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

# Statuses a CI dashboard shows as failures or as skipped test cases.
_FAILURE = {"failed", "check-failed", "unreachable", "approval-missing", "declined",
            "interrupted"}
_SKIPPED = {"skipped", "not-run", "planned", "deferred"}

# Terminal colour and cursor sequences a step's command may print (ESC [ ... letter).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Characters XML 1.0 forbids (ElementTree writes them as they are: the file would not parse).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def write_junit(data: dict[str, Any], path: Path) -> None:
    """One test suite per run, one test case per step (rollback steps included) and per
    objective set in the configuration that a step measured."""
    steps = data["steps"]
    objectives = [o for o in (data.get("scorecard") or {}).get("objectives", [])
                  if o["verdict"] != "no-objective"]
    suite = ET.Element("testsuite", {
        "name": f"runbook {data['runbook']['name']}",
        "tests": str(len(steps) + len(objectives)),
        "failures": str(sum(1 for s in steps if s["status"] == "check-failed")
                        + sum(1 for o in objectives if o["verdict"] == "missed")),
        "errors": str(sum(1 for s in steps if s["status"] in _FAILURE - {"check-failed"})),
        "skipped": str(sum(1 for s in steps if s["status"] in _SKIPPED)
                       + sum(1 for o in objectives if o["verdict"] == "not-measured")),
        "time": f"{data['duration_s']:.3f}",
        "timestamp": data["started"],
    })
    props = ET.SubElement(suite, "properties")
    for name, value in (("run_id", data["run_id"]), ("status", data["status"]),
                        ("dry_run", str(data["dry_run"]).lower()),
                        ("journal", data.get("journal") or "")):
        ET.SubElement(props, "property", {"name": name, "value": str(value)})
    for step in steps:
        case = ET.SubElement(suite, "testcase", {
            "classname": f"runbook.{data['runbook']['name']}.{step['phase']}",
            "name": step["name"],
            "time": f"{step['duration_s']:.3f}",
        })
        status = step["status"]
        message = step.get("error") or step.get("detail") or status
        if status == "check-failed":
            failure = ET.SubElement(case, "failure", {"message": message, "type": status})
            failure.text = _details(step)
        elif status in _FAILURE:
            error = ET.SubElement(case, "error", {"message": message, "type": status})
            error.text = _details(step)
        elif status in _SKIPPED:
            ET.SubElement(case, "skipped", {"message": f"{status}: {message}"})
        out = ET.SubElement(case, "system-out")
        out.text = _details(step)
    for objective in objectives:
        _objective_case(suite, data["runbook"]["name"], objective)
    for element in suite.iter():
        element.text = element.text and _xml_text(element.text)
        element.attrib = {k: _xml_text(v) for k, v in element.attrib.items()}
    tree = ET.ElementTree(suite)
    ET.indent(tree)
    path.parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)


def _objective_case(suite: ET.Element, runbook: str, o: dict[str, Any]) -> None:
    """`<OBJECTIVE> <= <target>` of the step's operation: passes when met."""
    case = ET.SubElement(suite, "testcase", {
        "classname": f"runbook.{runbook}.objectives",
        "name": f"{o['objective'].upper()} <= {o['target']} ({o['operation']}, step "
                f"{o['step']})",
        "time": "0.000",
    })
    measured = o["measured"] or "not measured"
    message = f"{o['objective'].upper()} {measured}, objective {o['target']}: {o['detail']}"
    if o["verdict"] == "missed":
        failure = ET.SubElement(case, "failure", {"message": message,
                                                  "type": "objective-missed"})
        failure.text = message
    elif o["verdict"] == "not-measured":
        ET.SubElement(case, "skipped", {"message": f"not measured: {o['detail']}"})
    out = ET.SubElement(case, "system-out")
    out.text = f"verdict: {o['verdict']}\n{message}"


def _xml_text(text: str) -> str:
    """Text XML can carry: colour codes dropped, other control characters shown as \\xNN."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", _ANSI.sub("", text))


def _details(step: dict[str, Any]) -> str:
    lines = [f"status: {step['status']}", f"attempts: {step['attempts']}"]
    for key in ("detail", "error", "hint", "approved_by"):
        if step.get(key):
            lines.append(f"{key}: {step[key]}")
    if step.get("inputs"):
        lines.append("inputs: " + json.dumps(step["inputs"], sort_keys=True, default=str))
    if step.get("outputs"):
        lines.append("outputs: " + json.dumps(step["outputs"], sort_keys=True, default=str))
    return "\n".join(lines)
