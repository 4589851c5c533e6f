"""Reports and generated configs rendered from Jinja2 templates in `templates/`.

Data in, text out: callers pass plain data (already masked); templates only format it.
One environment serves every template: incident reports, runbook drill reports and the
connector configs the replication kinds write.

A report has one template, in Markdown; its HTML is that Markdown rendered (text escaped)
inside `report-page.html.j2`, so the version shared with application teams can never say
less, or something else, than the Markdown.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markdown_it import MarkdownIt

from drctl.jsonable import dumps_readable
from drctl.resources import templates_dir
from drctl.secrets import Redactor

# A report file's extension (lower-cased) → the template format that renders it.
_TEMPLATE_FORMAT = {"md": "md", "markdown": "md", "html": "html", "htm": "html"}


def _to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def _to_yaml(value: Any) -> str:
    """One YAML value on one line (lists in flow style), as `yaml.safe_load` reads it back
    in a block mapping: for generated configs."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _md_cell(value: Any) -> str:
    """Text that stays inside one Markdown table cell."""
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", "<br>")


def _is_rows(value: Any) -> bool:
    """A list of flat records with the same keys: a table in a report, not a JSON dump."""
    return (isinstance(value, list) and bool(value)
            and all(isinstance(r, dict) and r.keys() == value[0].keys() for r in value)
            and not any(isinstance(v, dict | list) for r in value for v in r.values()))


def _without_rows(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if not _is_rows(v)}


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(templates_dir())),
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2")),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["to_json"] = _to_json
    env.filters["md_cell"] = _md_cell
    env.filters["to_yaml"] = _to_yaml
    env.filters["without_rows"] = _without_rows
    env.tests["rows"] = _is_rows
    return env


def render(template: str, redactor: Redactor | None = None, **context: Any) -> str:
    text = environment().get_template(template).render(**context)
    return redactor.redact(text) if redactor else text


def render_report(template_stem: str, fmt: str, redactor: Redactor | None = None,
                  **context: Any) -> str:
    """A report as `md` (its template `<template_stem>.md.j2`) or `html` (the same Markdown,
    rendered)."""
    markdown = render(f"{template_stem}.md.j2", None, **context)
    if fmt == "html":
        title = markdown.lstrip().splitlines()[0].lstrip("# ").strip() if markdown.strip() else ""
        markdown = render("report-page.html.j2", None, title=title,
                          body=_markdown_to_html(markdown))
    return redactor.redact(markdown) if redactor else markdown


def _markdown_to_html(markdown: str) -> str:
    # Raw HTML in the Markdown is escaped (html=False): report text is data, never markup.
    # The one tag the templates emit themselves is the line break inside a table cell.
    html = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    return html.replace("&lt;br&gt;", "<br>")


def report_format(path: Path) -> str:
    """`md` or `html`, from a report file's extension."""
    fmt = _TEMPLATE_FORMAT.get(path.suffix.lower().lstrip("."))
    if fmt is None:
        raise ValueError(f"{path}: a report is .md or .html")
    return fmt


def write_report(directory: Path, stem: str, context: dict[str, Any], template_stem: str,
                 redactor: Redactor | None = None,
                 extensions: Sequence[str] = ("md", "html", "json")) -> list[Path]:
    """Write `<stem>.<ext>` for each extension; returns the paths.

    `json` is the context itself; any other extension is rendered by `render_report` in the
    format `report_format` reads from it. The extension is kept as given, so a caller-chosen
    name such as `drill.HTM` is written under that name.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in extensions:
        path = directory / f"{stem}.{ext}"
        if ext == "json":
            data = redactor.redact_data(context) if redactor else context
            text = dumps_readable(data, sort_keys=True, default=str)
        else:
            text = render_report(template_stem, report_format(path), redactor, **context)
        _replace(path, text)
        paths.append(path)
    return paths


def _replace(path: Path, text: str) -> None:
    # Write beside, then rename: a reader (or a crash) never sees half a report.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
