"""The translation engine (drctl/translate/engine.py): when it asks the source whether it
answers."""

from __future__ import annotations

import pytest

from drctl.errors import Unreachable
from drctl.retry import RetryPolicy
from drctl.translate.engine import TranslateRequest, source_answers
from drctl.translate.model import TranslateMethod
from tests.unit.ops.support import FakeAdmin, FakeClients

POLICY = RetryPolicy(initial_s=0, attempts=1)


class CountingAdmin(FakeAdmin):
    asked = 0

    def describe_cluster(self, request_timeout: float):  # type: ignore[no-untyped-def]
        self.asked += 1
        return super().describe_cluster(request_timeout)


def _source(up: bool) -> tuple[FakeClients, CountingAdmin]:
    admin = CountingAdmin(up, {})
    return FakeClients("dc1", admin), admin


def test_a_source_the_caller_found_down_is_not_asked_again() -> None:
    """Failover's preflight waited out --deadline on the source already; translating with
    checkpoints or snapshots does not wait it out a second time."""
    src, admin = _source(up=True)
    req = TranslateRequest("dc1", "dc2", method=TranslateMethod.AUTO, source_reachable=False)
    assert source_answers(req, src, POLICY) is False  # type: ignore[arg-type]
    assert admin.asked == 0


def test_a_method_that_needs_the_source_asks_it_whatever_the_caller_found() -> None:
    src, admin = _source(up=False)
    req = TranslateRequest("dc1", "dc2", method=TranslateMethod.EXACT, source_reachable=False)
    with pytest.raises(Unreachable):
        source_answers(req, src, POLICY)  # type: ignore[arg-type]
    assert admin.asked == 1


@pytest.mark.parametrize("known", [None, True])
def test_without_a_verdict_from_the_caller_the_source_is_asked(known: bool | None) -> None:
    src, admin = _source(up=True)
    req = TranslateRequest("dc1", "dc2", source_reachable=known)
    assert source_answers(req, src, POLICY) is True  # type: ignore[arg-type]
    assert admin.asked == 1
