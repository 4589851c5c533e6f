"""Schema-id parity against real registries (Apicurio, Confluent's API) and the real lab: the
cases of issue 46 walked one after another on one registry pair — the same order on both
(ready), a schema on the primary only, two subjects numbered in opposite orders, the copy
that fixes them (export/import into an empty registry) — with `check`, the failover
preflight, a registry that does not answer, and a failback whose post-failover writes use a
schema the primary's registry lacks; long keys whose bytes spell an id, and registry URLs
that answer 404 to everything (issue 51)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from drctl.config import load_config
from drctl.lab.registry import LOAD_SCHEMA, avro_values, export_registry, import_registry
from drctl.lab.workload import WorkloadSpec, create_topics, run_workload
from drctl.registry import wire
from drctl.registry.canonical import AVRO, Schema
from drctl.state import marker_store
from tests.conftest import RunningLab, RunningRegistries
from tests.lab.support import produce, run_drctl, run_json, wait_replicated
from tests.lab.test_failback import restore
from tests.lab.test_failover import scoped_config
from tests.unit.support import http_server

pytestmark = pytest.mark.lab


def record_schema(name: str, field: str, kind: str = "string") -> Schema:
    return Schema(AVRO, f'{{"type": "record", "name": "{name}", "namespace": "drctl.test", '
                        f'"fields": [{{"name": "{field}", "type": "{kind}"}}]}}')


def encoded(schema_id: int, count: int, partitions: int = 2) -> list[tuple[int, bytes, bytes]]:
    """`count` records whose values carry `schema_id` (the payload is never decoded)."""
    return [(i % partitions, f"k{i}".encode(), wire.encode(schema_id, b"\x02" + bytes([i])))
            for i in range(count)]


def check(config: Path) -> tuple[int, str]:
    """`drctl check` on the test's topics: exit status and all it said."""
    status, out, err = run_drctl("--config", str(config), "check", "--deadline", "10")
    return status, out + err


def failover_preflight(config: Path, *extra: str) -> tuple[int, str]:
    """A failover dry run: the preflight, nothing changed."""
    status, out, err = run_drctl("--config", str(config), "failover", "--dry-run",
                                 "--deadline", "10", *extra)
    return status, out + err


@pytest.fixture
def restore_lab(lab: RunningLab) -> Iterator[None]:
    yield
    restore(lab)


def test_schema_parity_cases_on_one_registry_pair(lab: RunningLab, registries: RunningRegistries,
                                                 ns: str, tmp_path: Path) -> None:
    primary, secondary = registries.client("primary"), registries.client("secondary")
    config = registries.configure(scoped_config(lab, ns, tmp_path))
    topics = {c: f"{ns}-{c}" for c in ("a", "b", "c", "d", "plain")}
    create_topics(lab.primary, tuple(topics.values()), 2)

    # Records without a registry encoding are no finding.
    produce(lab.primary, topics["plain"], [(0, b"k", b'{"plain": "json"}'), (1, None, b"text")])

    # 1. The same schema registered in the same order on both: Confluent's serializer (what
    #    `lab load --schema-registry` writes with) finds its id on the primary.
    a_value = f"{topics['a']}-value"
    load = Schema(AVRO, LOAD_SCHEMA)
    id_a = primary.register(a_value, load)
    assert secondary.register(a_value, load) == id_a, "the registries start in step"
    run_workload(lab.primary, WorkloadSpec(topics=(topics["a"],), partitions=2, records=20,
                                           transactions=0, groups=()),
                 encode=avro_values(registries.url("primary")))
    for topic in topics.values():
        lab.wait_mirror_topic(topic)
    wait_replicated(lab, topics["a"], 20)
    status, said = check(config)
    assert status == 0, said
    assert "schemas in parity (1 id sampled)" in said
    status, doc = run_json("--config", str(config), "check")
    assert doc["schemas"]["ids"] == [id_a] and doc["schemas"]["encoded"] > 0

    # 2. A schema registered on the primary only.
    b_value = f"{topics['b']}-value"
    b_schema = record_schema("B", "amount", "long")
    id_b = primary.register(b_value, b_schema)
    produce(lab.primary, topics["b"], encoded(id_b, 6))
    wait_replicated(lab, topics["b"], 6)
    status, said = check(config)
    assert status == 3, said
    assert f"schema id {id_b} ({b_value} v1 on primary's registry) is missing on secondary's " \
           f"registry; records in {topics['b']} carry it" in said
    status, said = failover_preflight(config)
    assert status == 3, said
    assert f"schema id {id_b} ({b_value} v1 on primary's registry) is missing" in said
    assert topics["b"] in said and "--force" in said

    # 3. Two subjects numbered in opposite orders (B registered on the secondary first puts
    #    the two back in step).
    assert secondary.register(b_value, b_schema) == id_b
    c_value, d_value = f"{topics['c']}-value", f"{topics['d']}-value"
    c_schema, d_schema = record_schema("C", "c"), record_schema("D", "d", "int")
    id_c, id_d = primary.register(c_value, c_schema), primary.register(d_value, d_schema)
    assert (secondary.register(d_value, d_schema), secondary.register(c_value, c_schema)) == \
        (id_c, id_d), "the secondary numbers D first"
    produce(lab.primary, topics["c"], encoded(id_c, 4))
    produce(lab.primary, topics["d"], encoded(id_d, 4))
    wait_replicated(lab, topics["c"], 4)
    wait_replicated(lab, topics["d"], 4)
    status, said = check(config)
    assert status == 3, said
    for schema_id in (id_c, id_d):
        assert f"schema id {schema_id} resolves to a different schema on secondary's " \
               "registry" in said
    status, said = failover_preflight(config)
    assert status == 3, said
    assert f"schema id {id_c} resolves to a different schema" in said
    assert f"schema id {id_d} resolves to a different schema" in said
    status, said = failover_preflight(config, "--force")
    assert status == 0, said
    assert "--force: going on with mirrored records (primary -> secondary): schemas NOT in " \
           "parity: 2 id(s) resolving to a different schema" in said

    # A registry that does not answer: unknown (exit 4), never in parity.
    silent = registries.configure(tmp_path / "drctl.yaml", secondary="http://127.0.0.1:9/x")
    status, said = check(silent)
    assert status == 4, said
    assert "schemas unknown: secondary's registry (http://127.0.0.1:9/x) did not answer" in said
    registries.configure(config)

    # 4. The primary's registry copied into an empty one for the secondary, ids kept.
    copy = export_registry(registries.ports["primary"])
    registries.empty("secondary")
    assert registries.client("secondary").subjects() == []
    import_registry(registries.ports["secondary"], copy)
    status, said = check(config)
    assert status == 0, said
    assert "schemas in parity (4 ids sampled)" in said


def test_failback_names_a_post_failover_schema_the_primarys_registry_lacks(
        lab: RunningLab, registries: RunningRegistries, ns: str, tmp_path: Path,
        restore_lab: None) -> None:
    primary, secondary = registries.client("primary"), registries.client("secondary")
    topic = f"{ns}-acct"
    subject = f"{topic}-value"
    config = registries.configure(scoped_config(lab, ns, tmp_path))
    create_topics(lab.primary, (topic,), 2)
    registries.in_step()
    first = record_schema("Acct", "balance", "long")
    id_first = primary.register(subject, first)
    assert secondary.register(subject, first) == id_first
    produce(lab.primary, topic, encoded(id_first, 10))
    lab.wait_mirror_topic(topic)
    wait_replicated(lab, topic, 10)

    status, out = run_json("--config", str(config), "failover", "--yes", "--deadline", "10")
    assert status == 0, out
    assert out["marker"]["schemas"]["failover"][0]["state"] == "in parity"

    # A producer on the secondary evolves the schema: its registry alone has the new id.
    evolved = record_schema("Acct", "owner")
    id_new = secondary.register(subject, evolved)
    assert primary.schema(id_new) is None, "the primary's registry has no such id"
    produce(lab.secondary, topic, encoded(id_new, 4))

    status, said_out, said_err = run_drctl("--config", str(config), "failback", "--yes",
                                           "--deadline", "10")
    said = said_out + said_err
    assert status == 3, said
    assert f"schema id {id_new} ({subject} v2 on secondary's registry)" in said
    assert f"records in {topic} carry it" in said
    # The gap records' ids mean the same on the secondary: they are no finding.
    assert "gap records (primary -> secondary): schemas in parity (1 id sampled)" in said
    # Refused before anything moved: no reverse flow, no failback step recorded.
    connectors = lab.lab.connect_client(lab.state).connectors()
    assert not [c for c in connectors if c.startswith("mm2-secondary-primary")], connectors
    marker = marker_store(load_config(config), None).open_markers()[0]
    assert not [s for s in marker.steps if s.startswith("failback:")], marker.steps


def test_long_keys_that_spell_an_id_are_no_schema_id_and_a_real_one_is_still_caught(
        lab: RunningLab, registries: RunningRegistries, ns: str, tmp_path: Path) -> None:
    """Issue 51, finding 6: a topic keyed by customer numbers as Kafka's LongSerializer
    writes them (8 bytes big-endian, so the first five read as magic byte 0 and an id), its
    values plain, on two registries that number the id differently."""
    primary, secondary = registries.client("primary"), registries.client("secondary")
    config = registries.configure(scoped_config(lab, ns, tmp_path))
    longs, avro = f"{ns}-longs", f"{ns}-x"
    create_topics(lab.primary, (longs, avro), 2)
    registries.in_step()
    x_value, y_value = f"{avro}-value", f"{ns}-y-value"
    # Fields of this test's own: a registry gives content it has seen its id again.
    own = ns.replace("-", "_")
    x, y = record_schema("X", f"x_{own}"), record_schema("Y", f"y_{own}", "int")
    id_x, id_y = primary.register(x_value, x), primary.register(y_value, y)
    assert (secondary.register(y_value, y), secondary.register(x_value, x)) == (id_x, id_y), \
        "the secondary numbers Y first"
    keys = [struct.pack(">q", id_x << 24 | 70_000 + n) for n in range(10)]
    assert {wire.schema_id(k) for k in keys} == {id_x}
    produce(lab.primary, longs, [(n % 2, key, f"customer {n}".encode())
                                 for n, key in enumerate(keys)])
    lab.wait_mirror_topic(longs)
    wait_replicated(lab, longs, 10)

    status, doc = run_json("--config", str(config), "check", "--deadline", "10")
    assert status == 0, doc
    notes = [f for f in doc["findings"] if f["area"] == "schemas"]
    assert [(f["object"], f["severity"]) for f in notes] == [(f"schema id {id_x}", "note")]
    assert f"records in {longs} (keys) start like a registry encoding with id {id_x}, which " \
           f"primary's registry files only under {x_value} v1, not under a subject of that " \
           "topic and side" in notes[0]["difference"]
    assert doc["schemas"]["state"] == "in parity" and doc["schemas"]["ids"] == []
    status, said = failover_preflight(config)
    assert status == 0, said
    assert "Preflight failed" not in said

    # A topic whose values really carry the id, filed under its subject: still caught.
    produce(lab.primary, avro, encoded(id_x, 4))
    lab.wait_mirror_topic(avro)
    wait_replicated(lab, avro, 4)
    status, said = check(config)
    assert status == 3, said
    assert f"schema id {id_x} resolves to a different schema on secondary's registry " \
           f"({y_value} v1) than on primary's ({x_value} v1); records in {avro} carry it" \
           in said
    assert f"records in {longs} carry it" not in said
    status, said = failover_preflight(config)
    assert status == 3, said
    assert f"schema id {id_x} resolves to a different schema" in said


class _Answers404(BaseHTTPRequestHandler):
    """What an ingress's default backend does: 404 to everything, no registry's error body."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b"default backend - 404"
        self.send_response(404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def answers_404() -> Iterator[str]:
    """A plain HTTP server answering 404 to every request: its URL."""
    with http_server(_Answers404) as url:
        yield url


def test_a_registry_url_that_answers_404_to_everything_is_no_registry(
        lab: RunningLab, registries: RunningRegistries, ns: str, tmp_path: Path,
        answers_404: str) -> None:
    """Issue 51, finding 7: a wrong path of the real registry (its root, without
    /apis/ccompat/v7: its web server answers 404 with `error_code` 404) and a server that
    answers 404 to everything read as registries with nothing in them: in parity."""
    primary, secondary = registries.client("primary"), registries.client("secondary")
    config = registries.configure(scoped_config(lab, ns, tmp_path))
    topic = f"{ns}-acct"
    create_topics(lab.primary, (topic,), 2)
    registries.in_step()
    schema = record_schema("Acct", "balance", "long")
    schema_id = primary.register(f"{topic}-value", schema)
    assert secondary.register(f"{topic}-value", schema) == schema_id
    produce(lab.primary, topic, encoded(schema_id, 6))
    lab.wait_mirror_topic(topic)
    wait_replicated(lab, topic, 6)

    wrong = registries.url("primary").removesuffix("/apis/ccompat/v7")
    assert wrong != registries.url("primary")
    cases = {"primary": wrong, "secondary": answers_404}
    for cluster, url in cases.items():
        registries.configure(config, **{cluster: url})
        named = f"{cluster}'s registry ({url}) is not a schema registry"
        status, out, err = run_drctl("--config", str(config), "config", "check",
                                     "--deadline", "10")
        assert status == 4, out + err
        assert named in err, err
        assert f"{cluster}'s schema registry at {url} answers" not in out, out
        status, said = check(config)
        assert status == 4, said
        assert named in said and "schemas in parity" not in said
        # A failover goes on without knowing (an outage takes a registry too), and says so.
        status, said = failover_preflight(config)
        assert status == 0, said
        assert "Schema parity of the mirrored records (primary -> secondary) unknown, going " \
               f"on: {named}" in said, said
    registries.configure(config)
    status, said = check(config)
    assert status == 0, said
