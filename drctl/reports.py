"""Reports and generated configs rendered from Jinja2 templates in `templates/`.

Data in, text out: callers pass plain data (already masked); templates only format it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from drctl.resources import templates_dir
from drctl.secrets import Redactor


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(templates_dir())),
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2")),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["tojson_pretty"] = lambda v: json.dumps(v, indent=2, sort_keys=True)
    return env


def render(template: str, redactor: Redactor | None = None, **context: Any) -> str:
    text = environment().get_template(template).render(**context)
    return redactor.redact(text) if redactor else text


def write_report(directory: Path, stem: str, context: dict[str, Any], template_stem: str,
                 redactor: Redactor | None = None) -> list[Path]:
    """Write `<stem>.md`, `<stem>.html` and `<stem>.json`; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("md", "html"):
        path = directory / f"{stem}.{ext}"
        path.write_text(render(f"{template_stem}.{ext}.j2", redactor, **context))
        paths.append(path)
    data = redactor.redact_data(context) if redactor else context
    json_path = directory / f"{stem}.json"
    json_path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    paths.append(json_path)
    return paths
