"""One context per command (drctl/context.py), built from the config."""

from __future__ import annotations

from drctl.context import OpsContext
from drctl.replication.base import kind_named
from tests.unit.ops.support import FakeAdmin, FakeClients, _config


def test_from_config_builds_the_kind_and_factories() -> None:
    ctx = OpsContext.from_config(_config())
    assert ctx.kind is kind_named("mirrormaker2")
    assert ctx.require_kind() is ctx.kind
    assert ctx.clients("dc2").bootstrap == "y"


def test_a_context_used_as_a_block_forgets_its_clients_at_the_end() -> None:
    built: list[str] = []

    def clients(name: str) -> FakeClients:
        built.append(name)
        return FakeClients(name, FakeAdmin(True, {}))

    with OpsContext(_config(), clients=clients) as ctx:  # type: ignore[arg-type]
        assert ctx.clients("dc1") is ctx.clients("dc1")
    assert built == ["dc1"] and ctx.clients_built == 1
    ctx.clients("dc1")  # after the block: a new one
    assert built == ["dc1", "dc1"]
