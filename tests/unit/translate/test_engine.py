"""The translation engine (drctl/translate/engine.py): when it asks the source whether it
answers, and when the command's translation runs again."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from drctl import rerun
from drctl.config import parse_config
from drctl.context import OpsContext
from drctl.errors import Unreachable, UsageError
from drctl.retry import RetryPolicy
from drctl.translate import engine
from drctl.translate.engine import TranslateRequest, source_answers
from drctl.translate.model import TranslateMethod
from tests.unit.ops.support import FakeAdmin, FakeClients

POLICY = RetryPolicy(initial_s=0, attempts=1)


class CountingAdmin(FakeAdmin):
    asked = 0

    def list_topics(self, topic=None, timeout=-1):  # type: ignore[no-untyped-def]
        self.asked += 1
        return super().list_topics(topic, timeout)


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


# The command's translation run again (drctl/rerun.py) when a cluster drops under it.
CONFIG = parse_config({
    "clusters": {"dc1": {"bootstrap.servers": "x"}, "dc2": {"bootstrap.servers": "y"}},
    "replication": {"kind": "mirrormaker2", "source": "dc1", "target": "dc2"},
    "retry": {"initial_s": 0.01, "max_s": 0.01, "attempts": 3}})


def _ctx(said: list[str]) -> OpsContext:
    return OpsContext(CONFIG, lambda name: None, lambda cluster: None,  # type: ignore[arg-type]
                      None, said.append)


def _translations(monkeypatch: pytest.MonkeyPatch, *outcomes: object
                  ) -> tuple[list[int], list[str]]:
    """translate_offsets answering `outcomes` in turn (an exception is raised); the clusters'
    wait in between recorded, not made."""
    calls: list[int] = []
    waits: list[str] = []

    def translate(ctx: OpsContext, req: TranslateRequest, approve: object = None) -> object:
        calls.append(1)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(engine, "translate_offsets", translate)
    monkeypatch.setattr(rerun, "await_clusters",
                        lambda ctx, clusters, *a, **k: waits.extend(clusters))
    return calls, waits


_TRANSPORT = KafkaException(KafkaError(KafkaError._TRANSPORT,
                                       "Failed while waiting for response from broker"))


def test_a_broker_that_drops_under_the_translation_makes_it_run_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured in CI: a describe answered "Failed while waiting for response from broker"
    a second after the target's broker was killed, and translate-offsets ended exit 4 without
    naming the cluster. Now the clusters are waited for and the translation runs again."""
    done = object()
    calls, waits = _translations(monkeypatch, _TRANSPORT, done)
    said: list[str] = []
    req = TranslateRequest("dc1", "dc2", method=TranslateMethod.EXACT, source_deadline_s=30)
    assert engine.run_translation(_ctx(said), req) is done
    assert len(calls) == 2 and waits == ["dc1", "dc2"]  # exact needs the source too
    assert said[0].startswith("The translation stopped at a step: ")
    assert "waiting up to 30s for dc1 and dc2 to answer" in said[0]
    assert said[1] == ("Running the translation again: it reads every position again; the "
                       "commits already made stay (run 2)")


@pytest.mark.parametrize("error", [
    engine._source_down("dc1", "x:9092"),  # the source was waited for already
    UsageError("--groups is not a valid regex"),
    KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "denied")),
])
def test_what_no_wait_changes_ends_the_translation_at_once(
        monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    calls, _ = _translations(monkeypatch, error, object())
    with pytest.raises(type(error)):
        engine.run_translation(_ctx([]), TranslateRequest("dc1", "dc2"))
    assert len(calls) == 1


@pytest.mark.parametrize("method", [TranslateMethod.AUTO, TranslateMethod.CHECKPOINT])
def test_a_method_that_can_do_without_the_source_waits_for_the_target_only(
        monkeypatch: pytest.MonkeyPatch, method: TranslateMethod) -> None:
    """The run again asks the source itself and, should it stay down, translates without it
    (auto: checkpoints): waiting for it first would end the command exit 4 instead."""
    done = object()
    calls, waits = _translations(monkeypatch, _TRANSPORT, done)
    req = TranslateRequest("dc1", "dc2", method=method)
    assert engine.run_translation(_ctx([]), req) is done
    assert len(calls) == 2 and waits == ["dc2"]
