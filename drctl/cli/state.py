"""What the root command's global options decide, shared by every subcommand."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from drctl.config import Config, config_path_from, load_config
from drctl.context import OpsContext
from drctl.terminal import OutputFormat, Terminal


@dataclass
class AppState:
    config_option: str | None = None
    output: OutputFormat = OutputFormat.text
    debug: bool = False
    quiet: bool = False
    _config: Config | None = field(default=None, repr=False)
    _terminal: Terminal | None = field(default=None, repr=False)
    _contexts: list[OpsContext] = field(default_factory=list, repr=False)

    def reset(self) -> None:
        """Forget the previous invocation (tests run many commands in one process)."""
        self.close()
        self.__init__()  # type: ignore[misc]

    def context(self, deadline_s: float | None = None, *, app: str | None = None,
                topics: Sequence[str] = (), groups: Sequence[str] = ()) -> OpsContext:
        """The command's context (config, clients, marker stores; progress to stderr; the
        incident scope --app or --topics/--groups name), closed by the error boundary when
        the command ends, however it ends."""
        config = self.config()
        ctx = OpsContext.from_config(config, self.terminal().step, deadline_s,
                                     config.scope(app, topics, groups))
        self._contexts.append(ctx)
        return ctx

    def close(self) -> None:
        """Close the contexts this command made: their clients go."""
        for ctx in self._contexts:
            ctx.close()
        self._contexts.clear()

    @property
    def config_path(self) -> Path:
        return config_path_from(self.config_option)

    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.config_path)
            self.terminal().redactor = self._config.redactor
            from drctl.kafka.clients import check_client_properties

            check_client_properties(self._config)
            from drctl.ops.steps.flow_status import pending_stop_warnings
            from drctl.state import marker_store

            for warning in pending_stop_warnings(marker_store(self._config, None)):
                self.terminal().warn(warning)
        return self._config

    def terminal(self, output: OutputFormat | None = None) -> Terminal:
        if self._terminal is None:
            self._terminal = Terminal(output=self.output, quiet=self.quiet, debug=self.debug)
        if output is not None:
            self._terminal.output = output
        return self._terminal


# The error boundary reads this when a command fails, so it is module-level on purpose.
CURRENT = AppState()
