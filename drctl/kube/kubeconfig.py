"""A kubeconfig read into what one HTTPS call needs: the server, how to trust it, and who drctl
is (a bearer token or a client certificate); or the pod's own service account (in-cluster).

Only static credentials: `exec` and `auth-provider` plugins run programs drctl does not run,
so they are refused with what to do instead. Secrets stay in memory (a client key given as
data is written to a private temporary file only while OpenSSL loads it) and never appear in
a message.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from drctl.errors import ConfigError

# Where a pod finds its service account (Kubernetes mounts it there).
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class KubeLogin:
    """The server and drctl's identity on it. `source`: where it came from, in words (a
    kubeconfig and its context, or the service account), for messages."""

    server: str
    source: str
    tls: ssl.SSLContext | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    namespace: str | None = None  # the context's namespace (or the service account's)


def _b64(value: str, what: str, key: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise ConfigError(f"{what} is not base64", key=key) from exc


def _named(entries: Any, name: str, what: str, path: str) -> Mapping[str, Any]:
    for entry in entries or []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            inner = entry.get(what)
            return inner if isinstance(inner, Mapping) else {}
    raise ConfigError(f"no {what} named '{name}'", path=path, key=f"{what}s",
                      hint=f"Check the kubeconfig's {what}s and the context that names them.")


def kubeconfig_paths(explicit: str | None) -> list[Path]:
    """The kubeconfig files to read, as kubectl picks them: the one given, else each of
    $KUBECONFIG (first mention wins), else ~/.kube/config when it exists."""
    if explicit:
        return [Path(explicit)]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [Path(p) for p in env.split(os.pathsep) if p]
    home = Path.home() / ".kube" / "config"
    return [home] if home.is_file() else []


def load_login(kubeconfig: str | None = None, context: str | None = None) -> KubeLogin:
    """The login of `context` (None: the current context) in the kubeconfig drctl is given,
    or finds; the pod's service account when there is no kubeconfig at all."""
    paths = [p for p in kubeconfig_paths(kubeconfig) if p.is_file()]
    if not paths:
        if kubeconfig:
            raise ConfigError(f"no such file: {kubeconfig}", key="replication.strimzi.kubeconfig")
        return in_cluster_login()
    merged: dict[str, Any] = {"clusters": [], "users": [], "contexts": []}
    current = None
    for path in paths:
        try:
            doc = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read the kubeconfig: {exc}", path=str(path)) from exc
        if not isinstance(doc, Mapping):
            raise ConfigError("a kubeconfig is a mapping", path=str(path))
        for key in ("clusters", "users", "contexts"):
            for entry in doc.get(key) or []:
                # Relative file names in an entry are relative to the file that holds it.
                merged[key].append({**entry, "_dir": str(path.parent)})
        current = current or doc.get("current-context")
    where = ", ".join(str(p) for p in paths)
    name = context or current
    if not name:
        raise ConfigError("no context given and no current-context", path=where,
                          hint="Set replication.strimzi.context.")
    ctx = _named(merged["contexts"], name, "context", where)
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    cluster = _named(merged["clusters"], str(cluster_name), "cluster", where)
    cluster_dir = next(str(e["_dir"]) for e in merged["clusters"] if e.get("name") == cluster_name)
    user: Mapping[str, Any] = {}
    user_dir = cluster_dir
    if user_name:
        user = _named(merged["users"], str(user_name), "user", where)
        user_dir = next(str(e["_dir"]) for e in merged["users"] if e.get("name") == user_name)
    server = str(cluster.get("server") or "")
    if not server:
        raise ConfigError(f"cluster '{cluster_name}' has no server", path=where)
    for plugin in ("exec", "auth-provider"):
        if user.get(plugin):
            raise ConfigError(
                f"user '{user_name}' logs in through an {plugin} plugin, which drctl does not "
                "run", path=where, key=f"users.{user_name}.{plugin}",
                hint="Give drctl a kubeconfig with a static login: a service account token "
                "(`kubectl create token <account>`: token or tokenFile) or a client "
                "certificate.")
    tls = _tls(cluster, user, Path(cluster_dir), Path(user_dir), where) \
        if server.startswith("https:") else None
    token = user.get("token")
    if user.get("tokenFile") and not token:
        token = _resolve(Path(user_dir), str(user["tokenFile"])).read_text().strip()
    return KubeLogin(server.rstrip("/"), f"kubeconfig {where}, context {name}", tls,
                     str(token) if token else None,
                     str(user["username"]) if user.get("username") else None,
                     str(user["password"]) if user.get("password") else None,
                     str(ctx["namespace"]) if ctx.get("namespace") else None)


def in_cluster_login(root: Path = SERVICE_ACCOUNT) -> KubeLogin:
    """The pod's service account: its token, the cluster's CA, the API's address."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get(
        "KUBERNETES_SERVICE_PORT", "443")
    token_file = root / "token"
    if not host or not token_file.is_file():
        raise ConfigError("no kubeconfig and not in a Kubernetes pod",
                          key="replication.strimzi.kubeconfig",
                          hint="Set replication.strimzi.kubeconfig, or $KUBECONFIG.")
    ca = root / "ca.crt"
    tls = ssl.create_default_context(cafile=str(ca) if ca.is_file() else None)
    namespace_file = root / "namespace"
    host = f"[{host}]" if ":" in host else host
    return KubeLogin(f"https://{host}:{port}", "the pod's service account", tls,
                     token_file.read_text().strip(), None, None,
                     namespace_file.read_text().strip() if namespace_file.is_file() else None)


def _resolve(base: Path, name: str) -> Path:
    path = Path(name).expanduser()
    return path if path.is_absolute() else base / path


def _tls(cluster: Mapping[str, Any], user: Mapping[str, Any], cluster_dir: Path,
         user_dir: Path, where: str) -> ssl.SSLContext:
    try:
        if cluster.get("certificate-authority-data"):
            ca = _b64(str(cluster["certificate-authority-data"]), "certificate-authority-data",
                      "clusters.certificate-authority-data")
            context = ssl.create_default_context(cadata=ca.decode())
        elif cluster.get("certificate-authority"):
            context = ssl.create_default_context(
                cafile=str(_resolve(cluster_dir, str(cluster["certificate-authority"]))))
        else:
            context = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify"):
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cluster.get("tls-server-name"):
            # Python checks the hostname of the URL; a server name override is not
            # supported by urllib: fail loudly rather than connect to something else.
            raise ConfigError("tls-server-name is not supported", path=where,
                              hint="Use the server's own name in `server`.")
        _client_certificate(context, user, user_dir)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot use the kubeconfig's TLS settings: {reason}",
                          path=where) from exc
    return context


def _client_certificate(context: ssl.SSLContext, user: Mapping[str, Any],
                        user_dir: Path) -> None:
    cert, key = user.get("client-certificate-data"), user.get("client-key-data")
    if cert or key:
        # OpenSSL loads a chain from files only: a private directory, removed at once.
        with tempfile.TemporaryDirectory(prefix="drctl-kube-") as tmp:
            cert_path, key_path = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
            for path, value, name in ((cert_path, cert, "client-certificate-data"),
                                      (key_path, key, "client-key-data")):
                if value:
                    path.touch(mode=0o600)
                    path.write_bytes(_b64(str(value), name, f"users.{name}"))
            context.load_cert_chain(str(cert_path) if cert else str(
                _resolve(user_dir, str(user.get("client-certificate")))),
                str(key_path) if key else (str(_resolve(user_dir, str(user["client-key"])))
                                           if user.get("client-key") else None))
    elif user.get("client-certificate"):
        context.load_cert_chain(
            str(_resolve(user_dir, str(user["client-certificate"]))),
            str(_resolve(user_dir, str(user["client-key"]))) if user.get("client-key") else None)
