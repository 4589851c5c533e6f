"""The terminal: Rich for people on stderr, data (JSON, tables, YAML) for scripts on stdout.

A command's data reaches stdout whole: `-q` never hides it, and when stdout is not a terminal
nothing is folded or wrapped (`drctl config show > f` is valid YAML, piped tables keep whole
words). Progress, logs and warnings go to stderr. Reports are rendered elsewhere
(`drctl.reports`).

With `--output json` stdout carries one JSON document: what the command emitted with
`emit_json` (and `stream_json`), completed by the error boundary with `exit_status` and, when
the command failed, `error` (`finish_json`; docs/json.md).

One `Terminal` per process; commands never print any other way.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from typing import IO, Any

import yaml
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from drctl.jsonable import dumps_readable
from drctl.secrets import Redactor


class OutputFormat(StrEnum):
    text = "text"
    json = "json"


class Terminal:
    def __init__(self, *, output: OutputFormat = OutputFormat.text, quiet: bool = False,
                 debug: bool = False, redactor: Redactor | None = None) -> None:
        self.output = output
        self.quiet = quiet
        self.debug = debug
        self.redactor = redactor or Redactor()
        self.err = _console(sys.stderr)
        self.out = _console(sys.stdout)
        self.emitted = False  # whether stdout has received data other than the JSON document
        # --output json: the document's members not yet written, whether its `{` is on stdout
        # and how many members are (a long list streamed by `stream_json`).
        self._document: dict[str, Any] = {}
        self._opened = False
        self._members = 0

    @property
    def json_mode(self) -> bool:
        return self.output == OutputFormat.json

    @property
    def interactive(self) -> bool:
        return self.err.is_terminal

    def info(self, message: str, *, markup: bool = False) -> None:
        """Plain text unless `markup` (our own Rich markup, never data)."""
        if not self.quiet:
            text = self.redactor.redact(message)
            self.err.print(text if markup else escape(text))

    def step(self, message: str) -> None:
        if not self.quiet:
            self.err.print(f"[cyan]•[/] {escape(self.redactor.redact(message))}")

    def success(self, message: str) -> None:
        if not self.quiet:
            self.err.print(f"[green]✓[/] {escape(self.redactor.redact(message))}")

    def warn(self, message: str) -> None:
        self.err.print(f"[yellow]![/] {escape(self.redactor.redact(message))}")

    def error(self, message: str) -> None:
        # Wrapped between words on a terminal (as every message); whole when piped.
        self.err.print(f"[bold red]error:[/] {escape(self.redactor.redact(message))}")

    def detail(self, text: str | None) -> None:
        """A library's own words behind an error (librdkafka's, urllib's): --debug only; the
        message has said the cause in words."""
        if self.debug and text:
            self.err.print(f"  detail: {self.redactor.redact(text)}", markup=False,
                           highlight=False)

    def emit_json(self, data: Mapping[str, Any]) -> None:
        """The command's data for scripts: keys of the one JSON document on stdout, secrets
        masked, key order kept. With --output json it is written when the command ends
        (`finish_json` adds `exit_status`, and `error` when it failed), so it is whole even
        when the command fails after this; otherwise at once."""
        payload = self.redactor.plain_data(dict(data))
        if not self.json_mode:
            self.emit_text(json.dumps(payload, indent=2))
            return
        self._document.update(payload)

    def stream_json(self, key: str, items: Iterable[Mapping[str, Any]]) -> None:
        """A list too long to hold (a topic dump) as the document's `key`, written item by item,
        one compact item per line; the keys emitted so far come before it, later ones after.
        Items are plain data with fixed, non-secret field names: each line is masked as text
        (masking each value of each item would cost ten times the encoding)."""
        encode = json.JSONEncoder(separators=(",", ":")).encode
        write = sys.stdout.write
        write(self._members_so_far() + self._separator() + f"  {json.dumps(key)}: [")
        self._members += 1
        count = 0
        try:
            for item in items:
                write(("\n" if count == 0 else ",\n") + self.redactor.redact(encode(item)))
                count += 1
        finally:
            # Closed however the iteration ends: the document stays valid JSON.
            write("\n  ]" if count else "]")
            sys.stdout.flush()

    def finish_json(self, exit_status: int, error: Mapping[str, Any] | None = None) -> None:
        """End the JSON document (--output json): the data emitted, `exit_status`, and
        `error` ({message, hint, kind, exit_status}) when the command failed. Nothing when
        stdout carried other data (`--format csv`, `--metrics`): that is the output asked
        for."""
        if not self.json_mode or self.emitted:
            return
        self._document["exit_status"] = int(exit_status)
        if error is not None:
            self._document["error"] = self.redactor.plain_data(dict(error))
        sys.stdout.write(self._members_so_far() + "\n}\n")
        sys.stdout.flush()

    def _members_so_far(self) -> str:
        """The document's opening brace (once) and the members emitted since the last write."""
        text = "" if self._opened else "{"
        self._opened = True
        for name, value in self._document.items():
            text += self._separator() + f"  {json.dumps(name)}: " \
                + dumps_readable(value, indent=1)
            self._members += 1
        self._document = {}
        return text

    def _separator(self) -> str:
        return ",\n" if self._members else "\n"

    def emit_yaml(self, data: Any) -> None:
        """Data as YAML on stdout, secrets masked (masked first: YAML may quote a secret)."""
        payload = self.redactor.plain_data(data)
        self.emit_text(yaml.safe_dump(payload, sort_keys=False, width=sys.maxsize,
                                      allow_unicode=True).rstrip("\n"))

    def emit_text(self, text: str) -> None:
        """Plain data on stdout as it is (a command line to copy, a runbook): never folded,
        never hidden by `-q`, secrets masked."""
        sys.stdout.write(self.redactor.redact(text) + "\n")
        sys.stdout.flush()
        self.emitted = True

    def table(self, title: str | None, columns: Sequence[str],
              rows: Sequence[Sequence[Any]], *, markup: bool = False) -> None:
        """A table of data: on stdout even with `-q`. With `--output json` the JSON is the data,
        so the table goes to stderr for people (and `-q` hides it).

        Cells are plain text; with `markup` the caller has escaped its data and styles the
        rest."""
        if self.json_mode and self.quiet:
            return
        console = self.err if self.json_mode else self.out
        if not console.is_terminal:
            # Piped or in a log: plain aligned columns (as `kafka-consumer-groups.sh` prints),
            # no box drawing, for grep, awk and diff.
            plain = [[self.redactor.redact("" if v is None else str(v)) for v in row]
                     for row in rows]
            if markup:
                plain = [[Text.from_markup(c).plain for c in row] for row in plain]
            text = plain_columns(columns, plain)
            if title:
                text = f"{self.redactor.redact(title)}\n{text}"
            console.file.write(text + "\n")
            console.file.flush()
            if console is self.out:
                self.emitted = True
            return
        cells = [[self.redactor.redact("" if v is None else str(v)) for v in row]
                 for row in rows]
        shown = [[Text.from_markup(c).plain for c in row] for row in cells] if markup \
            else cells
        if title:
            console.print(f"[italic]{escape(self.redactor.redact(title))}[/]")
        widths = column_widths(columns, shown, console.width)
        if widths is None:
            # Too narrow for whole words side by side: each row as a block of `column:
            # value` lines, wrapped between words, never inside one.
            console.file.write(blocks(columns, shown, console.width) + "\n")
            console.file.flush()
            return
        # Columns set apart by spaces, a rule under the header: no box to draw, so a row
        # takes only the lines its words need.
        table = Table(header_style="bold", box=box.SIMPLE_HEAD, show_edge=False,
                      pad_edge=False)
        for col, width in zip(columns, widths, strict=True):
            table.add_column(col, overflow="fold", width=width)
        for row in cells:
            # Rich wraps between words only: a comma-separated list gets a space after each
            # comma, so that it breaks there rather than inside an address.
            row = [_COMMA_LIST.sub(", ", c) for c in row]
            table.add_row(*(row if markup else (escape(c) for c in row)))
        console.print(table)

    @contextmanager
    def progress(self, description: str, total: float | None = None) -> Iterator[Any]:
        """A Rich progress bar on a TTY; silent otherwise (CI logs stay readable)."""
        if self.quiet or not self.interactive:
            yield _NullProgress()
            return
        columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                   TextColumn("{task.completed:,.0f}"), TimeElapsedColumn()]
        with Progress(*columns, console=self.err, transient=True) as progress:
            task = progress.add_task(description, total=total)
            yield _TaskProgress(progress, task)


def plain_columns(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows as columns aligned by spaces, headers in capitals, one line per row."""
    lines = [[c.upper().replace(" ", "_") for c in columns],
             *([" ".join(cell.split()) or "-" for cell in row] for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True))
                     .rstrip() for line in lines)


# Between two columns of a table drawn on a terminal: their padding and the space between.
_GUTTER = 3
_COMMA_LIST = re.compile(r",(?=\S)")


def _words(cell: str) -> list[str]:
    """The tokens a cell wraps between: words, and the items of a comma-separated list
    (bootstrap.servers) so that a long list breaks after a comma, never inside an address."""
    return [part for word in cell.split() for part in re.split(r"(?<=,)", word) if part]


def column_widths(columns: Sequence[str], rows: Sequence[Sequence[str]],
                  width: int) -> list[int] | None:
    """Widths that fit the columns side by side in `width` with every token whole — each at
    least its longest token, the room left shared by what each needs to stay on one line —
    or None when even their longest tokens do not fit."""
    texts = [[column, *(row[i] for row in rows)] for i, column in enumerate(columns)]
    least = [max((len(w) for cell in cells for w in _words(cell)), default=1)
             for cells in texts]
    whole = [max(max(len(" ".join(_words(cell))) for cell in cells), n)
             for cells, n in zip(texts, least, strict=True)]
    room = width - _GUTTER * (len(columns) - 1)
    if sum(least) > room:
        return None
    if sum(whole) <= room:
        return whole
    # Share the room above the minimums in proportion to what each column still wants.
    spare, wants = room - sum(least), [w - n for w, n in zip(whole, least, strict=True)]
    given = [n + spare * want // sum(wants) for n, want in zip(least, wants, strict=True)]
    return given


def blocks(columns: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> str:
    """Each row as lines of `column: value`, wrapped to `width` between tokens (a token
    longer than the width stands alone on its line); rows set apart by a blank line."""
    label = max(len(c) for c in columns) + 2
    out: list[str] = []
    for row in rows:
        if out:
            out.append("")
        for column, cell in zip(columns, row, strict=True):
            lines = _wrap(_words(cell) or ["-"], max(20, width - label))
            out.append(f"{column + ':':<{label}}{lines[0]}")
            out.extend(" " * label + line for line in lines[1:])
    return "\n".join(out)


def _wrap(words: Sequence[str], width: int) -> list[str]:
    lines = [""]
    for word in words:
        joined = f"{lines[-1]}{'' if lines[-1].endswith(',') or not lines[-1] else ' '}{word}"
        if lines[-1] and len(joined) > width:
            lines.append(word)
        else:
            lines[-1] = joined
    return lines


def _console(file: IO[str]) -> Console:
    """A Console on `file`. On a terminal long lines wrap to its width; anywhere else (a pipe, a
    file, a CI log) they stay whole: Rich would otherwise fold them at 80 columns."""
    console = Console(file=file, highlight=False)
    if not console.is_terminal:
        console = Console(file=file, highlight=False, width=_UNBOUNDED, soft_wrap=True)
    return console


# Wide enough that no table or line folds, small enough for Rich's layout arithmetic.
_UNBOUNDED = 100_000


class _NullProgress:
    def advance(self, amount: float = 1) -> None:
        pass

    def update(self, **_: Any) -> None:
        pass


class _TaskProgress:
    def __init__(self, progress: Progress, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, amount: float = 1) -> None:
        self._progress.advance(self._task, amount)

    def update(self, **fields: Any) -> None:
        self._progress.update(self._task, **fields)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"

