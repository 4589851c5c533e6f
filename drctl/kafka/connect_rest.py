"""A small client for Kafka Connect's REST API (status, pause/resume/stop, offsets)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

from drctl.errors import DrctlError, Unreachable


class ConnectError(DrctlError):
    """Connect answered with an error status."""

    def __init__(self, message: str, status: int, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.status = status


class ConnectorMissing(ConnectError):
    pass


class ConnectClient:
    def __init__(self, url: str, *, username: str | None = None, password: str | None = None,
                 timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._auth = None
        if username is not None:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
            self._auth = f"Basic {token}"

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self._auth:
            req.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            try:
                detail = json.loads(detail).get("message", detail)
            except (ValueError, AttributeError):
                pass
            cls = ConnectorMissing if exc.code == 404 else ConnectError
            raise cls(f"Kafka Connect at {self.url} answered {method} {path} with "
                      f"{exc.code}: {detail}", exc.code) from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unreachable(f"Kafka Connect at {self.url} is unreachable ({reason}).",
                              "Check that the Connect worker runs and the URL in the config.") \
                from exc
        return json.loads(payload) if payload.strip() else None

    def info(self) -> dict[str, Any]:
        return self.request("GET", "/")

    def connectors(self) -> list[str]:
        return self.request("GET", "/connectors")

    def status(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/connectors/{name}/status")

    def config(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/connectors/{name}/config")

    def put_config(self, name: str, config: dict[str, str]) -> Any:
        return self.request("PUT", f"/connectors/{name}/config", config)

    def create(self, name: str, config: dict[str, str], initial_state: str | None = None) -> Any:
        body: dict[str, Any] = {"name": name, "config": config}
        if initial_state:
            body["initial_state"] = initial_state
        return self.request("POST", "/connectors", body)

    def delete(self, name: str) -> None:
        self.request("DELETE", f"/connectors/{name}")

    def pause(self, name: str) -> None:
        self.request("PUT", f"/connectors/{name}/pause")

    def resume(self, name: str) -> None:
        self.request("PUT", f"/connectors/{name}/resume")

    def stop(self, name: str) -> None:
        self.request("PUT", f"/connectors/{name}/stop")

    def restart_failed(self, name: str) -> None:
        """Restart the connector and its tasks where they FAILED (Kafka 3.0+); a FAILED task
        stays so until restarted, even once its cause is gone."""
        self.request("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")

    def offsets(self, name: str) -> dict[str, Any]:
        return self.request("GET", f"/connectors/{name}/offsets")

    def alter_offsets(self, name: str, offsets: list[dict[str, Any]]) -> Any:
        return self.request("PATCH", f"/connectors/{name}/offsets", {"offsets": offsets})

    def connector_state(self, name: str) -> tuple[str, list[str]]:
        """(connector state, task states) — e.g. ('RUNNING', ['RUNNING'])."""
        st = self.status(name)
        return st["connector"]["state"], [t["state"] for t in st.get("tasks", [])]
