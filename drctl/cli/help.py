"""How drctl's help reads at 80 columns (plain Click help, `rich_markup_mode=None`).

Click wraps at hyphens (`consumer-` / `timestamps`) and inside long words, shows a string
default as `(30s)`, and Typer names value types `<str>`, `<int range> [x>=0]`,
`<list[str]>`. Here: text wraps at spaces only; every option shows its metavar (a word such
as TOPIC, N, DIR, or its choices `[a|b]`) and its default as `[default: 30s]`; the root
command lists its commands by purpose. Every command and group of drctl is built from these
classes through `Typer` below.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import typer

# Typer vendors Click (typer._click) since 0.29; its formatter is the one help is written with.
from typer._click.formatting import HelpFormatter, join_options, measure_table
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


def wrap_text(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "",
              preserve_paragraphs: bool = False) -> str:
    """Click's `wrap_text` (paragraphs; a `\\b` line keeps a block as written), breaking lines
    at spaces only: never inside `copy-safe`, `post-failover` or a word too long to fit."""
    wrapper = textwrap.TextWrapper(width, initial_indent=initial_indent,
                                   subsequent_indent=subsequent_indent,
                                   replace_whitespace=False, break_on_hyphens=False,
                                   break_long_words=False)
    text = text.expandtabs()
    if not preserve_paragraphs:
        return wrapper.fill(text)
    paragraphs: list[tuple[int, bool, str]] = []
    buf: list[str] = []
    indent: int | None = None

    def flush() -> None:
        if buf:
            raw = buf[0].strip() == "\b"
            paragraphs.append((indent or 0, raw, "\n".join(buf[1:]) if raw else " ".join(buf)))
            buf.clear()

    for line in text.splitlines():
        if not line:
            flush()
            indent = None
            continue
        if indent is None:
            indent = len(line) - len(line.lstrip())
            line = line.lstrip()
        buf.append(line)
    flush()
    out = []
    for extra, raw, body in paragraphs:
        first, rest = initial_indent + " " * extra, subsequent_indent + " " * extra
        if raw:
            out.append("\n".join((first if i == 0 else rest) + line
                                 for i, line in enumerate(body.splitlines())))
        else:
            out.append(textwrap.TextWrapper(
                width, initial_indent=first, subsequent_indent=rest, replace_whitespace=False,
                break_on_hyphens=False, break_long_words=False).fill(body))
    return "\n\n".join(out)


# Holds `[default: 30s]` together while it is wrapped (TextWrapper breaks at ASCII whitespace
# only); the formatter writes it as a space.
_KEEP = "\u00a0"


class Formatter(HelpFormatter):
    """Click's formatter with `wrap_text` above for text and definition lists."""

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        self.write(wrap_text(text, self.width, initial_indent=indent, subsequent_indent=indent,
                             preserve_paragraphs=True))
        self.write("\n")

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30,
                 col_spacing: int = 2) -> None:
        rows = list(rows)
        widths = measure_table(rows)
        first_col = min(widths[0], col_max) + col_spacing
        text_width = max(self.width - first_col - 2, 10)
        margin = " " * (first_col + self.current_indent)
        for first, second in rows:
            self.write(f"{'':>{self.current_indent}}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + margin)
            lines = wrap_text(second, text_width,
                              preserve_paragraphs=True).replace(_KEEP, " ").splitlines()
            self.write(f"{lines[0]}\n" if lines else "\n")
            for line in lines[1:]:
                self.write(f"{margin}{line}\n" if line else "\n")


class Context(typer.Context):
    formatter_class = Formatter


def _choice_text(choice: Any) -> str:
    return str(choice.value) if isinstance(choice, Enum) else str(choice)


def metavar(param: TyperOption | TyperArgument) -> str:
    """What the help shows for a parameter's value: its own metavar, its choices `[a|b]`, N
    for a number, PATH for a path, else its name in capitals."""
    if param.metavar is not None:
        return param.metavar
    desc = param.type_descriptor
    if desc.is_choice:
        return "[" + "|".join(_choice_text(c) for c in desc.choices or ()) + "]"
    annotation = desc.annotation
    if annotation in (int, float):
        return "N"
    if annotation is Path or desc.is_path:
        return "PATH"
    return (param.name or "value").upper()


def _default(param: TyperOption | TyperArgument, ctx: typer.Context) -> str | None:
    if isinstance(param.show_default, str):
        return param.show_default or None
    if not (param.show_default or ctx.show_default):
        return None
    value = param.get_default(ctx, call=False)
    if isinstance(param, TyperOption) and param.is_bool_flag:
        if not param.secondary_opts:
            return None
        opts = param.opts if value else param.secondary_opts
        return opts[0].lstrip("-/") if opts else None
    if value is None or callable(value):
        return None
    if isinstance(value, list | tuple):
        return ", ".join(_choice_text(v) for v in value) or None
    return _choice_text(value)


def help_record(param: Any, ctx: typer.Context) -> tuple[str, str] | None:
    """An option's or argument's line: names and metavar, help, then `[env var: X; default:
    Y; required]` (no number range: the help says what a value means)."""
    if not isinstance(param, TyperOption | TyperArgument):
        record: tuple[str, str] | None = param.get_help_record(ctx)
        return record
    if param.hidden:
        return None
    if isinstance(param, TyperOption):
        names = []
        for opts in (param.opts, param.secondary_opts):
            if opts:
                joined = join_options(opts)[0]
                names.append(joined if param.is_flag or param.count
                             else f"{joined} {metavar(param)}")
        name = " / ".join(names)
    else:
        name = metavar(param)
    extra = []
    if param.show_envvar and isinstance(param.envvar, str):
        extra.append(f"env var: {param.envvar}")
    default = _default(param, ctx)
    if default:
        extra.append(f"default: {default}")
    if param.required:
        extra.append("required")
    text = param.help or ""
    if extra:
        brackets = "[" + "; ".join(e.replace(" ", _KEEP) for e in extra) + "]"
        text = f"{text}  {brackets}" if text else brackets
    return name, text


def _format_params(command: Any, ctx: typer.Context, formatter: Any) -> None:
    args: list[tuple[str, str]] = []
    opts: list[tuple[str, str]] = []
    for param in command.get_params(ctx):
        record = help_record(param, ctx)
        if record is not None:
            (args if param.param_type_name == "argument" else opts).append(record)
    if args:
        with formatter.section("Arguments"):
            formatter.write_dl(args)
    if opts:
        with formatter.section("Options"):
            formatter.write_dl(opts)


# The root's options every command takes as well, before or after its name (app.py moves
# them in front): each command's help lists them, so nobody has to know to ask `drctl -h`.
GLOBAL_OPTIONS = ("config", "output", "debug", "quiet")


def _format_global_options(command: Any, ctx: typer.Context, formatter: Any) -> None:
    root: Any = ctx.find_root()
    if root is ctx:
        return  # the root lists them as its own
    own = {name for param in command.get_params(ctx) for name in getattr(param, "opts", ())}
    records = [help_record(param, root) for param in root.command.get_params(root)
               if param.name in GLOBAL_OPTIONS and not own & set(getattr(param, "opts", ()))]
    rows = [record for record in records if record is not None]
    if rows:
        with formatter.section("Global options (also before the command)"):
            formatter.write_dl(rows)


class Command(TyperCommand):
    context_class = Context

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _format_params(self, ctx, formatter)
        _format_global_options(self, ctx, formatter)


class Group(TyperGroup):
    """A command group; `SECTIONS` (name, commands) lists its commands under headings."""

    context_class = Context
    SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _format_params(self, ctx, formatter)
        self.format_commands(ctx, formatter)
        _format_global_options(self, ctx, formatter)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        shown = {name: cmd for name in self.list_commands(ctx)
                 if (cmd := self.get_command(ctx, name)) is not None and not cmd.hidden}
        if not shown:
            return
        placed = {name for _, names in self.SECTIONS for name in names}
        sections = [(title, [n for n in names if n in shown]) for title, names in self.SECTIONS]
        rest = [n for n in shown if n not in placed]
        if rest:
            sections.append(("Other commands" if self.SECTIONS else "Commands", rest))
        limit = formatter.width - 6 - max(len(n) for n in shown)
        # One column for every section, so the descriptions line up across them.
        pad = max(len(n) for n in shown)
        for title, names in sections:
            if names:
                with formatter.section(title):
                    formatter.write_dl([(n.ljust(pad), shown[n].get_short_help_str(limit))
                                        for n in names])


class RootGroup(Group):
    """`drctl -h`: the commands by what an operator needs them for."""

    SECTIONS = (
        ("Incident", ("failover", "failback", "reprotect", "translate-offsets", "audit",
                      "guard")),
        ("Inspect", ("status", "check", "gap-analysis", "dump-consumer-timestamps", "config")),
        ("Runbooks", ("runbook",)),
        ("Lab", ("lab",)),
    )


class Typer(typer.Typer):
    """`typer.Typer` whose commands and groups are this module's: plain help that reads at 80
    columns."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("cls", Group)
        kwargs.setdefault("rich_markup_mode", None)
        super().__init__(*args, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", Command)
        return super().command(*args, **kwargs)
