"""An in-process Kubernetes API for Strimzi's KafkaMirrorMaker2 (and ConfigMaps), with an
operator thread that writes status as Strimzi documents it.

The API keeps a resourceVersion per object, bumps metadata.generation when the spec changes,
answers 409 to a create of an object that exists, 422 to a JSON patch whose `test` fails or
that writes a connector state the CRD does not allow, and 401 without the bearer token. The
operator can be slowed, stopped, or made to put a spec back (GitOps) on cue.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.unit.support import JsonHandler

TOKEN = "s3cr3t-kube-token"
ROLES = {"sourceConnector": "MirrorSourceConnector",
         "checkpointConnector": "MirrorCheckpointConnector",
         "heartbeatConnector": "MirrorHeartbeatConnector"}


# kube-apiserver 1.34's answer to a JSON patch it cannot apply (a `test` that failed, a path
# that is not there): a bare Status, nothing in its details (measured on the lab's server).
NOT_APPLIED = "the server rejected our request due to an error in our request"


class PatchFailed(Exception):
    def __init__(self, code: int, message: str, causes: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.causes = causes or []


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def apply_json_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 (add, replace, remove, test) over a copy of `doc`."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = _pointer(op["path"])
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if op["op"] == "test":
            value = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if value != op["value"]:
                raise PatchFailed(422, NOT_APPLIED)
        elif op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                parent.insert(int(last), op["value"]) if op["op"] == "add" else \
                    parent.__setitem__(int(last), op["value"])
            else:
                if op["op"] == "replace" and last not in parent:
                    raise PatchFailed(422, NOT_APPLIED)
                parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
    return doc


@dataclass
class FakeKube:
    versions: tuple[str, ...] = ("v1",)
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    revision: int = 100
    requests: list[tuple[str, str]] = field(default_factory=list)
    # One write slipped in between drctl's read and its patch (a conflict), when set.
    interfere: bool = False

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            meta = obj.setdefault("metadata", {})
            self.revision += 1
            meta["resourceVersion"] = str(self.revision)
            meta.setdefault("generation", 1)
            self.objects[(plural, meta["namespace"], meta["name"])] = obj
            return obj

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.objects.get((plural, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def patch(self, plural: str, namespace: str, name: str,
              ops: list[dict[str, Any]]) -> dict[str, Any]:
        with self.lock:
            current = self.objects.get((plural, namespace, name))
            if current is None:
                raise PatchFailed(404, "not found")
            if self.interfere:
                self.interfere = False
                self.put(plural, current)  # someone else wrote it: a new resourceVersion
            new = apply_json_patch(current, ops)
            for mirror in (new.get("spec") or {}).get("mirrors") or []:
                for role in ROLES:
                    state = (mirror.get(role) or {}).get("state")
                    if state is not None and state not in ("running", "paused", "stopped"):
                        raise PatchFailed(422, f"KafkaMirrorMaker2.kafka.strimzi.io \"{name}\" "
                                               f"is invalid: spec.mirrors.{role}.state: "
                                               f"Unsupported value: \"{state}\"",
                                          [f"Unsupported value: \"{state}\""])
            if new.get("spec") != current.get("spec"):
                new["metadata"]["generation"] = current["metadata"]["generation"] + 1
            return self.put(plural, new)


def _split(path: str) -> tuple[str, str, str | None] | None:
    """(plural, namespace, name) of an object path."""
    parts = path.strip("/").split("/")
    if "namespaces" not in parts:
        return None
    i = parts.index("namespaces")
    rest = parts[i + 1:]
    if len(rest) == 2:
        return rest[1], rest[0], None
    if len(rest) == 3:
        return rest[1], rest[0], rest[2]
    return None


def _handler(kube: FakeKube) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def _status(self, code: int, message: str, causes: list[str] | None = None) -> None:
            reason = {404: "NotFound", 409: "Conflict", 422: "Invalid", 401: "Unauthorized"}
            body = {"kind": "Status", "status": "Failure", "message": message,
                    "reason": reason.get(code, "Unknown"), "code": code}
            body["details"] = {"causes": [{"reason": "FieldValueNotSupported", "message": c}
                                          for c in causes]} if causes else {}
            self.send_json(code, body)

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length)) if length else None

        def _handle(self) -> None:
            kube.requests.append((self.command, self.path))
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._status(401, "Unauthorized")
            if self.path == "/apis/kafka.strimzi.io":
                if not kube.versions:
                    return self._status(404, "the server could not find the requested resource")
                return self.send_json(200, {"kind": "APIGroup", "name": "kafka.strimzi.io",
                                        "versions": [{"groupVersion": f"kafka.strimzi.io/{v}",
                                                      "version": v} for v in kube.versions],
                                        "preferredVersion": {"version": kube.versions[0]}})
            where = _split(self.path)
            if where is None:
                return self._status(404, "not found")
            plural, namespace, name = where
            if "/kafka.strimzi.io/" in self.path and \
                    self.path.split("/")[3] not in kube.versions:
                return self._status(404, "the server could not find the requested resource")
            try:
                if self.command == "GET":
                    found = kube.get(plural, namespace, name or "")
                    return self.send_json(200, found) if found else self._status(404, "not found")
                if self.command == "POST":
                    body = self._body()
                    if kube.get(plural, namespace, body["metadata"]["name"]) is not None:
                        return self._status(409, "already exists")
                    body["metadata"]["namespace"] = namespace
                    return self.send_json(201, kube.put(plural, body))
                if self.command == "PUT":
                    body = self._body()
                    body["metadata"]["namespace"] = namespace
                    return self.send_json(200, kube.put(plural, body))
                if self.command == "PATCH":
                    assert self.headers["Content-Type"] == "application/json-patch+json"
                    return self.send_json(200, kube.patch(plural, namespace, name or "",
                                                      self._body()))
                if self.command == "DELETE":
                    with kube.lock:
                        kube.objects.pop((plural, namespace, name or ""), None)
                    return self.send_json(200, {"kind": "Status", "status": "Success"})
            except PatchFailed as exc:
                return self._status(exc.code, str(exc), exc.causes)
            return self._status(405, "method not allowed")

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    return Handler


class FakeOperator(threading.Thread):
    """Reconciles every KafkaMirrorMaker2 the way Strimzi documents, every `interval_s`:
    connectors in their spec's state (Connect's status JSON in `.status.connectors[]`), the
    offsets annotations acted on and removed, observedGeneration and Ready written.
    `mode`: "up", "down" (nothing), "slow" (each generation `delay_s` late) or "failing"
    (each generation observed with a NotReady condition, as Strimzi says a failed
    reconciliation: no Ready=False, no connectors changed). `revert`:
    (namespace, name) -> the spec it puts back on every pass (a GitOps tool)."""

    def __init__(self, kube: FakeKube, interval_s: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.kube = kube
        self.interval_s = interval_s
        self.mode = "up"
        self.delay_s = 0.0
        self.revert: dict[tuple[str, str], dict[str, Any]] = {}
        self.stored: dict[str, list[dict[str, Any]]] = {}  # connector -> stored offsets
        self.altered: dict[str, list[dict[str, Any]]] = {}
        self.first_seen: dict[tuple[str, str, int], float] = {}
        # connector -> how a stop hangs: "connector" (RUNNING, no task), "tasks" (a task
        # still RUNNING)
        self.hung_stop: dict[str, str] = {}
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def settled(self, namespace: str, name: str, timeout_s: float = 5.0) -> None:
        """Until the object's status shows its generation observed (its first status write
        done: later writes follow drctl's changes only)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            found = self.kube.get("kafkamirrormaker2s", namespace, name) or {}
            if (found.get("status") or {}).get("observedGeneration") == \
                    (found.get("metadata") or {}).get("generation"):
                return
            time.sleep(0.01)
        raise AssertionError(f"the fake operator never reconciled {namespace}/{name}")

    def run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self.mode == "down":
                continue
            for key in [k for k in list(self.kube.objects) if k[0] == "kafkamirrormaker2s"]:
                self.reconcile(key)

    def reconcile(self, key: tuple[str, str, str]) -> None:
        with self.kube.lock:
            obj = self.kube.objects.get(key)
            if obj is None:
                return
            meta = obj["metadata"]
            where = (meta["namespace"], meta["name"])
            if where in self.revert and obj["spec"] != self.revert[where]:
                self.kube.patch(key[0], *where, [{"op": "replace", "path": "/spec",
                                                  "value": copy.deepcopy(self.revert[where])}])
                return
            annotations = meta.get("annotations") or {}
            if annotations.get("strimzi.io/pause-reconciliation") == "true":
                return
            seen = self.first_seen.setdefault((*where, meta["generation"]), time.monotonic())
            if self.mode == "slow" and time.monotonic() - seen < self.delay_s:
                return
            before = copy.deepcopy(obj)
            if self.mode == "failing":
                status = obj.get("status") or {}
                obj["status"] = {**status, "observedGeneration": meta["generation"],
                                 "conditions": [{"type": "NotReady", "status": "True",
                                                 "reason": "ConnectRestException",
                                                 "message": "PUT /connectors/x/stop returned "
                                                            "500 (Internal Server Error)"}]}
                if obj != before:
                    self.kube.put(key[0], obj)
                return
            spec = obj["spec"]
            v1 = "clusters" not in spec and "connectCluster" not in spec
            connectors = []
            warnings: list[dict[str, str]] = []
            for mirror in spec.get("mirrors") or []:
                source = (mirror.get("source") or {}).get("alias") if v1 \
                    else mirror.get("sourceCluster")
                target = (spec.get("target") or {}).get("alias") if v1 \
                    else mirror.get("targetCluster")
                for role, cls in ROLES.items():
                    if role not in mirror:
                        continue
                    name = f"{source}->{target}.{cls}"
                    state = mirror[role].get("state") or "running"
                    connector = {"running": "RUNNING", "paused": "PAUSED",
                                 "stopped": "STOPPED"}[state]
                    tasks = [] if state == "stopped" else [{"id": 0, "state": connector}]
                    if state == "stopped" and name in self.hung_stop:
                        # Its source unreachable, the connector hangs in its own stop():
                        # the tasks are gone, the connector still says RUNNING.
                        connector = "RUNNING" if self.hung_stop[name] else connector
                        tasks = [{"id": 0, "state": "RUNNING"}] \
                            if self.hung_stop[name] == "tasks" else []
                    connectors.append({"name": name, "connector": {"state": connector},
                                       "tasks": tasks, "type": "source"})
                    if annotations.get("strimzi.io/mirrormaker-connector") == name:
                        warnings += self._offsets(obj, mirror[role], name, annotations)
            obj["status"] = {"observedGeneration": meta["generation"],
                             "conditions": [{"type": "Ready", "status": "True"}, *warnings],
                             "connectors": connectors}
            if obj != before:  # a status write only when something changed, as Strimzi
                self.kube.put(key[0], obj)

    def _offsets(self, obj: dict[str, Any], connector: dict[str, Any], name: str,
                 annotations: dict[str, str]) -> list[dict[str, str]]:
        """The annotation acted on and removed; or, as Strimzi, a Warning condition and the
        annotation kept (tried again on the next pass)."""
        action = annotations.get("strimzi.io/connector-offsets")
        namespace = obj["metadata"]["namespace"]
        if action == "alter":
            cm = self.kube.get("configmaps", namespace,
                               connector["alterOffsets"]["fromConfigMap"]["name"])
            assert cm is not None
            # Strimzi's key for a KafkaMirrorMaker2 connector, as its operator reads it.
            key = name.replace("->", "--") + ".json"
            if key not in cm["data"]:
                return [{"type": "Warning", "status": "True", "reason": "AlterOffsets",
                         "message": "Encountered error altering connector offsets. "
                                    f"Data field {key} is missing."}]
            offsets = json.loads(cm["data"][key])["offsets"]
            self.altered[name] = offsets
            self.stored[name] = offsets
        elif action == "list":
            cm_name = connector["listOffsets"]["toConfigMap"]["name"]
            self.kube.put("configmaps", {"metadata": {"name": cm_name, "namespace": namespace},
                                         "data": {name.replace("->", "--") + ".json": json.dumps(
                                             {"offsets": self.stored.get(name, [])})}})
        for annotation in ("strimzi.io/connector-offsets", "strimzi.io/mirrormaker-connector"):
            annotations.pop(annotation, None)
        return []


@contextmanager
def fake_kube(versions: tuple[str, ...] = ("v1",)) -> Iterator[tuple[FakeKube, FakeOperator,
                                                                      str]]:
    """The API and its operator for the block: (api, operator, base URL)."""
    kube = FakeKube(versions)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(kube))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    operator = FakeOperator(kube)
    operator.start()
    try:
        yield kube, operator, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        operator.stop()
        server.shutdown()
        server.server_close()


def mm2_v1(namespace: str = "secondary", name: str = "mm2") -> dict[str, Any]:
    """A forward KafkaMirrorMaker2 (primary -> secondary) in the v1 layout."""
    return {"apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaMirrorMaker2",
            "metadata": {"name": name, "namespace": namespace, "generation": 1},
            "spec": {"replicas": 1,
                     "target": {"alias": "secondary", "bootstrapServers": "secondary:9092",
                                "groupId": "mm2-secondary", "configStorageTopic": "mm2-configs",
                                "offsetStorageTopic": "mm2-offsets",
                                "statusStorageTopic": "mm2-status"},
                     "mirrors": [{"source": {"alias": "primary",
                                             "bootstrapServers": "primary:9092"},
                                  "sourceConnector": {"tasksMax": 1, "config": {
                                      "replication.factor": "1"}},
                                  "checkpointConnector": {"config": {}},
                                  "topicsPattern": "orders.*"}]}}


def mm2_v1beta2(namespace: str = "secondary", name: str = "mm2") -> dict[str, Any]:
    """The same flow in the v1beta2 layout (with a heartbeat connector)."""
    return {"apiVersion": "kafka.strimzi.io/v1beta2", "kind": "KafkaMirrorMaker2",
            "metadata": {"name": name, "namespace": namespace, "generation": 1},
            "spec": {"replicas": 1, "connectCluster": "secondary",
                     "clusters": [{"alias": "primary", "bootstrapServers": "primary:9092"},
                                  {"alias": "secondary", "bootstrapServers": "secondary:9092",
                                   "config": {"group.id": "mm2-secondary"}}],
                     "mirrors": [{"sourceCluster": "primary", "targetCluster": "secondary",
                                  "sourceConnector": {"config": {"replication.factor": "1"}},
                                  "checkpointConnector": {"config": {}},
                                  "heartbeatConnector": {},
                                  "topicsPattern": "orders.*",
                                  "topicsExcludePattern": "orders-tmp"}]}}
