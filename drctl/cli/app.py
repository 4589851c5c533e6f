"""The root command: global options and the one error boundary."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from typing import Annotated, Any

import typer

# Typer vendors Click (typer._click) since 0.29: the usage errors it raises.
from typer._click.core import Command
from typer._click.exceptions import ClickException, NoArgsIsHelpError
from typer.exceptions import Abort

from drctl.cli import (
    audit_cmd,
    check_cmd,
    config_cmd,
    dump_cmd,
    failback_cmd,
    failover_cmd,
    gap_cmd,
    guard_cmd,
    lab_cmd,
    reprotect_cmd,
    runbook,
    status_cmd,
    translate_cmd,
)
from drctl.cli.help import RootGroup, Typer
from drctl.cli.state import CURRENT
from drctl.errors import Aborted, DrctlError, ExitStatus, Unreachable, UsageError
from drctl.interrupts import sigterm_interrupts
from drctl.kafka.retriable import is_retriable, kafka_error
from drctl.terminal import OutputFormat, Terminal
from drctl.versions import runtime_versions
from drctl.yesno import bool_from_text

app = Typer(
    name="drctl",
    cls=RootGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Kafka disaster recovery: failover, failback, offset translation and gap analysis."
         "\n\n\b\nExamples:"
         "\n  drctl config init -h        # a first config, read from your replicator"
         "\n  drctl config check          # every cluster answers; what the settings cost"
         "\n  drctl status                # protected, exposed, or an incident"
         "\n  drctl failover --dry-run    # the plan; nothing changes"
         "\n  drctl COMMAND -h            # a command's options, examples, exit status",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,  # locals can hold passwords
    add_completion=True,
    rich_markup_mode=None,  # plain Click help: wraps cleanly at 80 columns, no box drawing
)
# `drctl -h` lists each command with a line that fits 80 columns, by section (RootGroup).
app.add_typer(config_cmd.app, name="config",
              short_help="Write, show and check the configuration.")
app.add_typer(lab_cmd.app, name="lab", short_help="Two local Kafka clusters and MirrorMaker 2.")
app.add_typer(runbook.app, name="runbook",
              short_help="DR procedures as data: validate, plan, run.")
for name, function, short in [
    ("translate-offsets", translate_cmd.translate_offsets_command,
     "Move group positions between clusters."),
    ("failover", failover_cmd.failover_command, "Fail over the source to its target."),
    ("failback", failback_cmd.failback_command, "Bring the source back after a failover."),
    ("reprotect", reprotect_cmd.reprotect_command, "Return to protection after failback."),
    ("gap-analysis", gap_cmd.gap_analysis, "Source records the target never received."),
    ("status", status_cmd.status_command, "Protected, exposed or incident; clusters."),
    ("check", check_cmd.check_command, "Readiness: would a failover work now?"),
    ("guard", guard_cmd.guard_command, "Keep exact group positions for a failover."),
    ("audit", audit_cmd.audit_command, "Audit the positions a failover applied."),
    ("dump-consumer-timestamps", dump_cmd.dump_consumer_timestamps,
     "Decode consumer timestamps and MM2's topics."),
]:
    app.command(name, short_help=short)(function)


def _version(value: bool) -> None:
    if value:
        versions = runtime_versions()
        term = CURRENT.terminal()
        if term.json_mode:
            term.emit_json({"versions": versions})
        else:
            term.emit_text("\n".join(f"{name} {version}" for name, version in versions.items()))
        raise typer.Exit()


@app.callback()
def root(
    config: Annotated[str | None, typer.Option(
        "--config", "-c", envvar="DRCTL_CONFIG", metavar="PATH",
        help="Configuration file (default: ./drctl.yaml).")] = None,
    output: Annotated[OutputFormat, typer.Option(
        "--output", "-o", case_sensitive=False,
        help="text: tables and data on stdout, messages on stderr; json: one JSON "
             "document on stdout.")] = OutputFormat.text,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and client logs.")]
    = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only errors and data.")] = False,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True,
        help="Print the versions of drctl, Python, confluent-kafka, librdkafka (and whether "
             "it has Kerberos, sasl_gssapi), PySpark and Java, and exit.")] = False,
) -> None:
    CURRENT.config_option = config
    CURRENT.output = output
    # DRCTL_DEBUG=1/true/yes/on turns it on; 0/false/no/off (or anything else) does not.
    CURRENT.debug = debug or bool_from_text(os.environ.get("DRCTL_DEBUG", "")) is True
    CURRENT.quiet = quiet
    if CURRENT.debug:
        import logging

        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)


def _report(terminal: Terminal, exc: DrctlError) -> dict[str, Any]:
    """Say the error on stderr; return it as the JSON document's `error`."""
    terminal.error(exc.message)
    if exc.hint:
        terminal.err.print(f"  {terminal.redactor.redact(exc.hint)}")
    error = _error(exc.message, exc.hint, _public_kind(exc), exc.exit_status)
    if isinstance(exc, Unreachable) and exc.waited_s is not None:
        # What drctl measured of its wait, against the deadline it waited under.
        error.update(waited_s=exc.waited_s, deadline_s=exc.deadline_s)
    return error


def _public_kind(exc: DrctlError) -> str:
    """The error's kind as docs/json.md names it: its nearest class in drctl.errors (a
    module's own subclass, such as ClusterUnreachable, is its base's kind)."""
    for cls in type(exc).__mro__:
        if cls.__module__ == "drctl.errors":
            return cls.__name__
    return type(exc).__name__


def _error(message: str, hint: str | None, kind: str, exit_status: int) -> dict[str, Any]:
    # A script reading stdout gets a JSON document on failure too, never 0 bytes.
    return {"message": message, "hint": hint or None, "kind": kind,
            "exit_status": int(exit_status)}


def _usage_error(exc: ClickException) -> dict[str, Any]:
    """Click's usage error (an unknown option, a bad value, a missing argument) as drctl's
    UsageError: said on stderr as Click says it, with the usage line."""
    exc.show()
    if isinstance(exc, NoArgsIsHelpError):  # `drctl runbook`: the help, on stderr
        return _error("No command given.", f"`{exc.ctx.command_path} -h` lists them.",
                      UsageError.__name__, exc.exit_code)
    ctx = getattr(exc, "ctx", None)
    hint = f"See `{ctx.command_path} -h`." if ctx is not None else None
    return _error(exc.format_message(), hint, UsageError.__name__, exc.exit_code)


# The root's options, also taken after the subcommand (`drctl status --config f.yaml -q`):
# they are moved in front of it before Typer reads the line.
_GLOBAL_FLAGS = frozenset({"--debug", "--quiet", "-q"})
_GLOBAL_WITH_VALUE = frozenset({"--config", "-c", "--output", "-o"})


def hoist_global_options(argv: list[str]) -> list[str]:
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":  # what follows is not drctl's to read
            rest.extend(argv[i:])
            break
        if arg in _GLOBAL_FLAGS or (arg.startswith("--") and "=" in arg and
                                    arg.split("=", 1)[0] in _GLOBAL_WITH_VALUE) \
                or (len(arg) > 2 and arg[:2] in _GLOBAL_WITH_VALUE):  # -ojson, -cFILE
            front.append(arg)
        elif arg in _GLOBAL_WITH_VALUE and i + 1 < len(argv):
            front.extend(argv[i:i + 2])
            i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


def requested_output(args: list[str]) -> OutputFormat:
    """The --output the line asks for, read before Typer parses it: a usage error stops
    parsing before the root's options take effect, and must still be a JSON document."""
    for i, arg in enumerate(args):
        if arg == "--":
            break
        value = None
        if arg in ("--output", "-o") and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--output="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-o") and len(arg) > 2:
            value = arg[2:]
        if value is not None and value.lower() in OutputFormat.__members__:
            return OutputFormat(value.lower())
    return OutputFormat.text


def _asks_for_help(args: list[str]) -> bool:
    words = args[:args.index("--")] if "--" in args else args
    return "-h" in words or "--help" in words


def main(argv: list[str] | None = None) -> int:
    """Run drctl; return the exit status instead of raising (tests call this in-process).

    The one error boundary: usage errors (Click's, exit 2), drctl's own errors, Ctrl-C (130)
    and anything unexpected (1) become a message on stderr and, with --output json, the
    `error` of the one JSON document on stdout, which ends with the exit status.
    """
    CURRENT.reset()
    args = hoist_global_options(sys.argv[1:] if argv is None else argv)
    CURRENT.output = requested_output(args)
    try:
        status, error = _run(args)
        if not (status == ExitStatus.SUCCESS and _asks_for_help(args)):  # help is for people
            CURRENT.terminal().finish_json(status, error)
    finally:
        CURRENT.close()  # the command's clients, however it ended
    return status


@functools.cache
def click_command() -> Command:
    """The Click command tree Typer builds from `app`: built once per process. Typer builds
    it at every call of the app (about 55 ms of a core for drctl's commands), and the tests
    call `main` many times in one process."""
    return typer.main.get_command(app)


def _run(args: list[str]) -> tuple[int, dict[str, Any] | None]:
    """The command's exit status, and its error as the JSON document's `error`."""
    try:
        returned = click_command().main(args=args, prog_name="drctl", standalone_mode=False)
    except ClickException as exc:
        return exc.exit_code, _usage_error(exc)
    except Abort:  # end of input at a question
        return ExitStatus.ABORTED, _report(CURRENT.terminal(),
                                           Aborted("Aborted: no answer (end of input)."))
    except SystemExit as exc:  # a broken pipe, shell completion
        code = exc.code
        return (code if isinstance(code, int) else
                ExitStatus.SUCCESS if code is None else ExitStatus.FAILURE), None
    except Exception as exc:  # noqa: BLE001 - the boundary: nothing escapes as a traceback
        # A Kafka answer that nothing asked again (a raw request while a broker restarts):
        # transient, so unknown (exit 4), never a failure to report (drctl/kafka/retriable.py).
        drctl_exc = exc if isinstance(exc, DrctlError) else _unanswered(exc)
        if drctl_exc is None:
            return _unexpected(exc)
        terminal = CURRENT.terminal()
        error = _report(terminal, drctl_exc)
        if CURRENT.debug:
            terminal.detail(drctl_exc.detail)
            terminal.err.print(terminal.redactor.redact(traceback.format_exc()))
        return drctl_exc.exit_status, error
    except KeyboardInterrupt:
        CURRENT.terminal().error("interrupted.")
        return ExitStatus.INTERRUPTED, _INTERRUPTED
    status = returned if isinstance(returned, int) else ExitStatus.SUCCESS
    # Typer ends a command interrupted by Ctrl-C with exit 130 (a runbook says so itself).
    return status, _INTERRUPTED if status == ExitStatus.INTERRUPTED else None


def _unanswered(exc: Exception) -> Unreachable | None:
    """A transient Kafka error as what it means to the operator; None for anything else."""
    if not is_retriable(exc):
        return None
    err = kafka_error(exc)
    cause = err.str() if err is not None else str(exc)
    return Unreachable(
        f"a Kafka cluster did not answer: {cause}. The step under way did not finish; "
        "what it would have read or written there is unknown.",
        "Run the same command again when the clusters answer (drctl check says which "
        "does not); it carries on from what was done.")


def _unexpected(exc: Exception) -> tuple[int, dict[str, Any]]:
    terminal = CURRENT.terminal()
    message = f"unexpected {type(exc).__name__}: {exc}"
    terminal.error(message)
    if CURRENT.debug:
        terminal.err.print(terminal.redactor.redact(traceback.format_exc()))
    else:
        terminal.err.print(f"  {_REPORT_IT}")
    return ExitStatus.FAILURE, _error(message, _REPORT_IT, type(exc).__name__,
                                      ExitStatus.FAILURE)


_REPORT_IT = "Run again with --debug for the traceback, and please report it."
_INTERRUPTED = _error("interrupted.", None, "Interrupted", ExitStatus.INTERRUPTED)


def run() -> None:
    try:
        # SIGTERM (CI cancelling, systemd stopping) ends a command as Ctrl-C does: exit 130,
        # the gap job interrupted on its server, drctl's temporary files gone.
        with sigterm_interrupts():
            status = main()
        sys.exit(status)
    except BrokenPipeError:
        # Whoever read stdout stopped (`drctl … | head`): no traceback for it, and nothing
        # more written to the closed pipe when Python flushes at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(ExitStatus.FAILURE)
    except KeyboardInterrupt:
        # A second Ctrl-C or SIGTERM while the first one's cleanup runs (`main` closing the
        # command's clients): still exit 130, and no traceback.
        sys.stderr.write("drctl: interrupted again; cleanup cut short.\n")
        sys.exit(ExitStatus.INTERRUPTED)
