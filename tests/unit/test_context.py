"""One context per command (drctl/context.py), built from the config."""

from __future__ import annotations

from drctl.context import OpsContext
from drctl.replication.base import kind_named
from tests.unit.ops.support import _config


def test_from_config_builds_the_kind_and_factories() -> None:
    ctx = OpsContext.from_config(_config())
    assert ctx.kind is kind_named("mirrormaker2")
    assert ctx.require_kind() is ctx.kind
    assert ctx.clients("dc2").bootstrap == "y"
