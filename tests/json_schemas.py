"""The JSON Schemas of `--output json` (docs/schemas/, docs/json.md): validate a command's real
output against its schema, as unit and lab tests do."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"


@cache
def registry() -> Registry:
    resources = []
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


def schema_name(command: list[str] | tuple[str, ...]) -> str:
    """`["runbook", "run"]` → `runbook-run.json`; the root (`--version`) → `drctl.json`."""
    return "-".join(command) + ".json" if command else "drctl.json"


def validate_output(command: list[str] | tuple[str, ...], document: Any) -> None:
    """Fail with every schema violation of `document`, the JSON `drctl COMMAND -o json` wrote;
    the error's exit status must be the document's."""
    name = schema_name(command)
    schema = registry().get_or_retrieve(name).value.contents
    validator = Draft202012Validator(schema, registry=registry())
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
                for e in validator.iter_errors(document)]
    assert not problems, f"{name}: " + "; ".join(problems[:10])
    if "error" in document:
        assert document["error"]["exit_status"] == document["exit_status"], document


def command_of(argv: list[str] | tuple[str, ...]) -> list[str]:
    """The command path in a drctl command line (`["--config", "f", "runbook", "run", "x"]`
    → `["runbook", "run"]`): the leading words that name commands and groups."""
    from drctl.cli.app import click_command, hoist_global_options

    group: Any = click_command()
    words = hoist_global_options(list(argv))
    i = 0
    while i < len(words) and words[i].startswith("-"):  # the root's options
        i += 2 if words[i] in ("--config", "-c", "--output", "-o") else 1
    path: list[str] = []
    while i < len(words) and hasattr(group, "commands") and words[i] in group.commands:
        group = group.commands[words[i]]
        path.append(words[i])
        i += 1
    return path
