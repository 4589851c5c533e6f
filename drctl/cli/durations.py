"""The one way a command-line option takes a duration: `90s`, `500ms`, `15m`, `6h`, `2d`, `1w`
or a bare number of seconds (what these options took before they took units)."""

from __future__ import annotations

from typing import Any

import typer

from drctl.timeparse import parse_duration

ACCEPTED = "e.g. 90s, 500ms, 15m, 6h, 2d, or a number of seconds"


def duration_option(help: str, *, default: str | None, minimum_s: float = 0.0,
                    names: tuple[str, ...] = (), hidden: bool = False) -> Any:
    """A Typer option whose value is seconds (a float) written in drctl's duration syntax.

    `default` is how the help shows the default (`30s`; None shows none). Bad input is
    Typer's usage error, exit 2, naming the option and the accepted forms."""
    def seconds(value: Any) -> float:
        try:
            parsed = parse_duration(value)
        except ValueError:
            raise typer.BadParameter(f"{value!r} is not a duration; use {ACCEPTED}.") from None
        if parsed < minimum_s:
            raise typer.BadParameter(f"{value!r} is shorter than the minimum, "
                                     f"{minimum_s:g} s.")
        return parsed

    return typer.Option(*names, parser=seconds, metavar="DURATION", show_default=default or False,
                        help=help, hidden=hidden)
