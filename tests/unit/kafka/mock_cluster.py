"""librdkafka's own mock cluster (rdkafka_mock.h), reached through ctypes in the librdkafka
that the confluent-kafka wheel bundles: brokers on loopback that answer like Kafka's and take
errors to push onto the next answers of a request type (`push`), or go down (`broker_down`).
No JVM: a test with it runs in a second.

The mock serves OffsetFetch, OffsetCommit, FindCoordinator, Metadata and the like, but not
DescribeGroups or ListGroups. `GroupApis` adds those two in front of it: a loopback proxy the
mock's brokers advertise, which passes every other request through, answers DescribeGroups
and ListGroups itself (every group Empty; the groups the test named) and takes errors for
them the same way — an error code, or KafkaError._TRANSPORT for a dropped connection.
"""

from __future__ import annotations

import ctypes
import glob
import os
import socket
import struct
import threading
from collections import defaultdict, deque
from collections.abc import Iterable

import confluent_kafka
from confluent_kafka import KafkaError

OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS = 8, 9, 15, 16, 18
_DROP = KafkaError._TRANSPORT


def librdkafka() -> ctypes.CDLL:
    """The librdkafka of the wheel (the one confluent-kafka itself runs)."""
    libs = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir,
                        "confluent_kafka.libs")
    found = glob.glob(os.path.join(libs, "librdkafka*.so*"))
    assert found, f"no bundled librdkafka in {libs}"
    lib = ctypes.CDLL(found[0])
    vp, cp, i32, i16 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int16
    for name, restype, argtypes in (
            ("rd_kafka_conf_new", vp, []),
            ("rd_kafka_conf_set", ctypes.c_int, [vp, cp, cp, cp, ctypes.c_size_t]),
            ("rd_kafka_new", vp, [ctypes.c_int, vp, cp, ctypes.c_size_t]),
            ("rd_kafka_destroy", None, [vp]),
            ("rd_kafka_mock_cluster_new", vp, [vp, ctypes.c_int]),
            ("rd_kafka_mock_cluster_destroy", None, [vp]),
            ("rd_kafka_mock_cluster_bootstraps", cp, [vp]),
            ("rd_kafka_mock_push_request_errors_array", None,
             [vp, i16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)]),
            ("rd_kafka_mock_clear_request_errors", None, [vp, i16]),
            ("rd_kafka_mock_broker_set_down", ctypes.c_int, [vp, i32]),
            ("rd_kafka_mock_broker_set_up", ctypes.c_int, [vp, i32]),
            ("rd_kafka_mock_broker_set_host_port", None, [vp, i32, cp, ctypes.c_int]),
            ("rd_kafka_mock_topic_create", ctypes.c_int, [vp, cp, ctypes.c_int, ctypes.c_int])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class MockCluster:
    """One mock cluster of `brokers` brokers, alive until close()."""

    def __init__(self, brokers: int = 1) -> None:
        self.lib = librdkafka()
        conf = self.lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(512)
        self.lib.rd_kafka_conf_set(conf, b"log_level", b"0", errstr, 512)
        self._rk = self.lib.rd_kafka_new(0, conf, errstr, 512)  # a producer that sends nothing
        assert self._rk, errstr.value
        self._mc = self.lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        assert self._mc
        self.bootstrap = self.lib.rd_kafka_mock_cluster_bootstraps(self._mc).decode()

    def create_topic(self, name: str, partitions: int) -> None:
        assert self.lib.rd_kafka_mock_topic_create(self._mc, name.encode(), partitions, 1) == 0

    def push(self, api_key: int, *codes: int) -> None:
        """The next len(codes) answers to `api_key` requests carry these errors in turn
        (KafkaError._TRANSPORT: the connection is closed instead)."""
        errors = (ctypes.c_int * len(codes))(*codes)
        self.lib.rd_kafka_mock_push_request_errors_array(self._mc, api_key, len(codes), errors)

    def clear(self, api_key: int) -> None:
        self.lib.rd_kafka_mock_clear_request_errors(self._mc, api_key)

    def broker_down(self, broker: int = 1) -> None:
        assert self.lib.rd_kafka_mock_broker_set_down(self._mc, broker) == 0

    def broker_up(self, broker: int = 1) -> None:
        assert self.lib.rd_kafka_mock_broker_set_up(self._mc, broker) == 0

    def advertise(self, broker: int, host: str, port: int) -> None:
        self.lib.rd_kafka_mock_broker_set_host_port(self._mc, broker, host.encode(), port)

    def close(self) -> None:
        self.lib.rd_kafka_mock_cluster_destroy(self._mc)
        self.lib.rd_kafka_destroy(self._rk)


def _drop(sock: socket.socket) -> None:
    """Close a connection so that its peer sees it closed at once: a close() alone, while
    another thread waits in recv() on the socket, sends nothing."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _recv(sock: socket.socket, n: int) -> bytes | None:
    """`n` bytes, or None once the connection is closed (by either side)."""
    data = b""
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def _frame(sock: socket.socket) -> bytes | None:
    head = _recv(sock, 4)
    if head is None:
        return None
    return _recv(sock, struct.unpack(">i", head)[0])


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


class GroupApis:
    """DescribeGroups and ListGroups (v0) in front of one-broker `cluster` (module
    docstring). `groups`: what ListGroups answers. Clients bootstrap at `bootstrap`."""

    def __init__(self, cluster: MockCluster, groups: Iterable[str] = ()) -> None:
        self.groups = list(groups)
        self._upstream = cluster.bootstrap.split(",")[0].rsplit(":", 1)
        self._errors: dict[int, deque[int]] = defaultdict(deque)
        self._lock = threading.Lock()
        self.answered: dict[int, int] = defaultdict(int)  # api key -> answers given here
        self._server = socket.create_server(("127.0.0.1", 0))
        port = self._server.getsockname()[1]
        self.bootstrap = f"127.0.0.1:{port}"
        cluster.advertise(1, "127.0.0.1", port)
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def push(self, api_key: int, *codes: int) -> None:
        """The next answers of DescribeGroups or ListGroups carry these errors in turn."""
        with self._lock:
            self._errors[api_key].extend(codes)

    def clear(self) -> None:
        with self._lock:
            self._errors.clear()

    def _next_error(self, api_key: int) -> int:
        with self._lock:
            queued = self._errors[api_key]
            return queued.popleft() if queued else 0

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection((self._upstream[0],
                                                     int(self._upstream[1])))
            except OSError:  # the broker is down: so is this connection
                _drop(client)
                continue
            self._sockets += [client, upstream]
            asked: dict[int, int] = {}  # correlation id -> version, of ApiVersions asked
            lock = threading.Lock()
            threading.Thread(target=self._requests, args=(client, upstream, asked, lock),
                             daemon=True).start()
            threading.Thread(target=self._answers, args=(client, upstream, asked, lock),
                             daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket, asked: dict[int, int],
                  lock: threading.Lock) -> None:
        while (frame := _frame(client)) is not None:
            api_key, version, correlation = struct.unpack(">hhi", frame[:8])
            if api_key not in (DESCRIBE_GROUPS, LIST_GROUPS):
                if api_key == API_VERSIONS:
                    asked[correlation] = version
                try:
                    upstream.sendall(struct.pack(">i", len(frame)) + frame)
                except OSError:  # the broker went down
                    break
                continue
            error = self._next_error(api_key)
            self.answered[api_key] += 1
            if error == _DROP:
                break
            client_id_len = struct.unpack(">h", frame[8:10])[0]
            body = frame[10 + max(client_id_len, 0):]
            answer = struct.pack(">i", correlation) + (
                self._describe(body, error) if api_key == DESCRIBE_GROUPS
                else self._list(error))
            with lock:
                try:
                    client.sendall(struct.pack(">i", len(answer)) + answer)
                except OSError:  # the client hung up first (a command that gave up)
                    break
        _drop(client)
        _drop(upstream)

    def _describe(self, body: bytes, error: int) -> bytes:
        count = struct.unpack(">i", body[:4])[0]
        at, out = 4, struct.pack(">i", count)
        for _ in range(count):
            size = struct.unpack(">h", body[at:at + 2])[0]
            group = body[at + 2:at + 2 + size].decode()
            at += 2 + size
            out += (struct.pack(">h", error) + _string(group)
                    + _string("" if error else "Empty") + _string("consumer") + _string("")
                    + struct.pack(">i", 0))
        return out

    def _list(self, error: int) -> bytes:
        groups = [] if error else self.groups
        return struct.pack(">hi", error, len(groups)) + b"".join(
            _string(g) + _string("consumer") for g in groups)

    def _answers(self, client: socket.socket, upstream: socket.socket, asked: dict[int, int],
                 lock: threading.Lock) -> None:
        while (frame := _frame(upstream)) is not None:
            correlation = struct.unpack(">i", frame[:4])[0]
            version = asked.pop(correlation, None)
            if version is not None:
                frame = self._with_group_apis(frame, version)
            with lock:
                try:
                    client.sendall(struct.pack(">i", len(frame)) + frame)
                except OSError:
                    break
        _drop(client)
        _drop(upstream)

    @staticmethod
    def _with_group_apis(frame: bytes, version: int) -> bytes:
        """The mock's ApiVersions answer with DescribeGroups and ListGroups v0 added: after
        the correlation id and error code, an array of (key, min, max) entries — compact,
        each with its tagged fields, from v3. An error answer (the version refused) stays."""
        if struct.unpack(">h", frame[4:6])[0] != 0:
            return frame
        keys = (DESCRIBE_GROUPS, LIST_GROUPS)
        if version < 3:
            count = struct.unpack(">i", frame[6:10])[0]
            end = 10 + 6 * count
            added = b"".join(struct.pack(">hhh", key, 0, 0) for key in keys)
            return frame[:6] + struct.pack(">i", count + 2) + frame[10:end] + added + frame[end:]
        count, at = _uvarint(frame, 6)
        end = at + 7 * (count - 1)
        assert all(frame[i + 6] == 0 for i in range(at, end, 7)), "tagged fields"
        assert count + 2 < 128
        added = b"".join(struct.pack(">hhhB", key, 0, 0, 0) for key in keys)
        return frame[:6] + bytes([count + 2]) + frame[at:end] + added + frame[end:]

    def close(self) -> None:
        self._server.close()
        for sock in self._sockets:
            try:
                sock.close()
            except OSError:
                pass
