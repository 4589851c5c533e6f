"""A real Kubernetes API server for the lab (`lab up --platform strimzi`): kube-apiserver and
etcd, built once per machine from the Go module proxy and kept in drctl's cache, started on
loopback as processes the lab owns; the lab speaks to it through drctl's own Kubernetes client
(`drctl.kube.api.KubeClient`).

The binaries come from a wrapper module that requires `k8s.io/kubernetes` with its staging
modules (`k8s.io/api`, `k8s.io/apiserver`, ...) replaced by their published `v0.x` versions,
as `k8s.io/kubernetes`' own go.mod replaces them with its `./staging` folders; etcd is the
`go.etcd.io/etcd/server/v3` that Kubernetes' go.mod pins, built from the same module (one
toolchain, no distribution package). About 15 CPU-minutes and 2 GB of memory the first time;
then `kube_binaries()` answers from the cache.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drctl.errors import DrctlError, LabError
from drctl.kube.api import KubeClient
from drctl.kube.kubeconfig import KubeLogin
from drctl.lab.processes import ManagedProcess, port_in_use, wait_until
from drctl.progress import Notify
from drctl.resources import cache_dir, cache_lock

KUBE_VERSION = "1.34.4"
GO_MIN = (1, 24)  # k8s.io/kubernetes 1.34's go.mod says `go 1.24.0`
# Small: the lab's API server holds a few resources, not a cluster's.
APISERVER_MEMORY_LIMIT = os.environ.get("DRCTL_LAB_KUBE_GOMEMLIMIT", "400MiB")
ETCD_MEMORY_LIMIT = os.environ.get("DRCTL_LAB_ETCD_GOMEMLIMIT", "200MiB")
TOKEN_USER = "drctl-lab"


@dataclass(frozen=True)
class KubeBinaries:
    version: str
    apiserver: Path
    etcd: Path


def _staging_version(version: str) -> str:
    major, minor, patch = version.split(".")
    if major != "1":
        raise LabError(f"Kubernetes {version} is not a 1.x release.", "Use e.g. 1.34.4.")
    return f"0.{minor}.{patch}"


def find_go() -> str | None:
    go = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go")
                                     if Path(p).exists()), None)
    return go


def _go_env() -> dict[str, str]:
    """The builds' Go caches live in drctl's cache (a `make clean` of the user's own Go work
    keeps them), the toolchain is the one installed (no download of another)."""
    root = cache_dir() / "go"
    return {**os.environ, "GOMODCACHE": str(root / "mod"), "GOCACHE": str(root / "build"),
            "GOFLAGS": "-mod=mod -buildvcs=false", "GOTOOLCHAIN": "local"}


def cached_binaries(version: str = KUBE_VERSION) -> KubeBinaries | None:
    """The binaries when this machine built them already, else None (never builds)."""
    final = cache_dir() / "kube" / version
    if not (final / ".complete").exists():
        return None
    return KubeBinaries(version, final / "kube-apiserver", final / "etcd")


def kube_binaries(version: str = KUBE_VERSION, *, notify: Notify = lambda _: None,
                  log_dir: Path | None = None) -> KubeBinaries:
    """kube-apiserver and etcd for `version`, built on first use (one build at a time per
    machine: others wait on the cache's lock, then find it done)."""
    found = cached_binaries(version)
    if found is not None:
        return found
    with cache_lock("kube"):
        found = cached_binaries(version)
        if found is not None:
            return found
        notify(f"Building kube-apiserver {version} and etcd from the Go module proxy (once per "
               "machine: about 15 CPU-minutes)")
        return _build(version, log_dir or cache_dir() / "kube")


def _check_go(go: str) -> None:
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True,
                         timeout=60, check=False).stdout.strip()
    m = re.match(r"go(\d+)\.(\d+)", out)
    if not m or (int(m.group(1)), int(m.group(2))) < GO_MIN:
        raise LabError(f"Go {out or '(unknown)'} is older than Go "
                       f"{GO_MIN[0]}.{GO_MIN[1]}, which kube-apiserver {KUBE_VERSION} needs.",
                       "Install Go 1.24 or newer (e.g. `apt-get install golang-go` on Debian "
                       "13, or go.dev/dl).")


def wrapper_go_mod(kubernetes_go_mod: str, version: str) -> str:
    """The wrapper module's go.mod: k8s.io/kubernetes at `version`, and every module its own
    go.mod replaces with a ./staging folder replaced by that module's published version."""
    staged = re.findall(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/", kubernetes_go_mod, re.M)
    if not staged:
        raise LabError(f"k8s.io/kubernetes v{version}'s go.mod names no staging module.",
                       "Is the module proxy answering with the real module?")
    staging = _staging_version(version)
    lines = ["module drctl.lab/kube-binaries", "", "go 1.24.0", "",
             f"require k8s.io/kubernetes v{version}", "", "replace ("]
    lines += [f"\t{module} => {module} v{staging}" for module in staged]
    return "\n".join([*lines, ")", ""])


def _run_logged(cmd: list[str], cwd: Path, env: dict[str, str], log: Path, what: str,
                timeout_s: float) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        try:
            done = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise LabError(f"{what} took over {timeout_s / 60:.0f} minutes.",
                           f"Read {log}.") from None
    if done.returncode != 0:
        raise LabError(f"{what} failed.", f"Read {log}.")


def _build(version: str, log_dir: Path) -> KubeBinaries:
    go = find_go()
    if go is None:
        raise LabError("Go was not found; the Strimzi lab builds kube-apiserver and etcd with "
                       "it (once per machine).",
                       "Install Go 1.24 or newer (e.g. `apt-get install golang-go` on Debian 13, "
                       "or go.dev/dl).")
    _check_go(go)
    root = cache_dir() / "kube"
    root.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "kube-build.log"
    log.write_text("")
    env = _go_env()
    staging = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        info = subprocess.run([go, "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"],
                              capture_output=True, text=True, env=env, cwd=staging,
                              timeout=1800, check=False)
        if info.returncode != 0:
            log.write_text(info.stdout + info.stderr)
            raise LabError(f"The Go module proxy did not serve k8s.io/kubernetes v{version}.",
                           f"Read {log}; is GOPROXY reachable?")
        go_mod = Path(json.loads(info.stdout)["GoMod"]).read_text()
        (staging / "go.mod").write_text(wrapper_go_mod(go_mod, version))
        minor = version.split(".")[1]
        ldflags = ("-s -w -X k8s.io/component-base/version.gitVersion=v" + version
                   + " -X k8s.io/component-base/version.gitMajor=1"
                   + f" -X k8s.io/component-base/version.gitMinor={minor}"
                   + " -X k8s.io/component-base/version.gitTreeState=clean")
        out = staging / "out"
        _run_logged([go, "build", "-trimpath", "-ldflags", ldflags, "-o",
                     str(out / "kube-apiserver"), "k8s.io/kubernetes/cmd/kube-apiserver"],
                    staging, env, log, f"Building kube-apiserver {version}", 3 * 3600)
        # The etcd Kubernetes pins (its go.mod's go.etcd.io/etcd/server/v3), whose module
        # root is etcd's main package.
        _run_logged([go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "etcd"),
                     "go.etcd.io/etcd/server/v3"], staging, env, log, "Building etcd", 3600)
        final = root / version
        if final.exists():
            shutil.rmtree(final)
        out.rename(final)
        (final / ".complete").write_text(f"kube-apiserver {version}\n")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return KubeBinaries(version, final / "kube-apiserver", final / "etcd")


# -- the lab's API server -------------------------------------------------------------------


@dataclass(frozen=True)
class KubePorts:
    api: int  # kube-apiserver's HTTPS port
    etcd: int  # etcd's client port; its peer port the next

    @property
    def etcd_peer(self) -> int:
        return self.etcd + 1


class KubeServer:
    """etcd plus kube-apiserver of one lab, under `<lab dir>/kube`: 127.0.0.1 only, HTTPS
    with a certificate from a CA of its own, one static token (a cluster admin)."""

    def __init__(self, lab_dir: Path) -> None:
        self.dir = lab_dir / "kube"

    def process(self, name: str) -> ManagedProcess:
        return ManagedProcess(name, self.dir / name, signature=str(self.dir / name))

    @property
    def pki(self) -> Path:
        return self.dir / "pki"

    @property
    def ca_file(self) -> Path:
        return self.pki / "ca.pem"

    @property
    def token_file(self) -> Path:
        return self.pki / "token"

    @property
    def kubeconfig(self) -> Path:
        return self.dir.parent / "kubeconfig"

    def url(self, ports: KubePorts) -> str:
        return f"https://127.0.0.1:{ports.api}"

    def client(self, ports: KubePorts) -> KubeClient:
        login = KubeLogin(self.url(ports), "the lab's kube-apiserver",
                          ssl.create_default_context(cafile=str(self.ca_file)),
                          self.token_file.read_text().strip())
        return KubeClient(login)

    def check_ports(self, ports: KubePorts) -> None:
        for name, port in (("etcd", ports.etcd), ("etcd", ports.etcd_peer),
                           ("kube-apiserver", ports.api)):
            if not self.process(name).is_running() and port_in_use(port):
                raise LabError(f"Port {port} on 127.0.0.1 (for the lab's {name}) is in use by "
                               "another process.",
                               "Stop that process or choose other ports (--kube-port).")

    def up(self, ports: KubePorts, binaries: KubeBinaries, notify: Notify) -> None:
        self.check_ports(ports)
        self._ensure_pki()
        etcd = self.process("etcd")
        if not etcd.is_running():
            data = etcd.workdir / "data"
            etcd.workdir.mkdir(parents=True, exist_ok=True)
            peer = f"http://127.0.0.1:{ports.etcd_peer}"
            client = f"http://127.0.0.1:{ports.etcd}"
            etcd.start([str(binaries.etcd), "--name", "lab", "--data-dir", str(data),
                        "--listen-client-urls", client, "--advertise-client-urls", client,
                        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                        "--initial-cluster", f"lab={peer}", "--log-level", "warn",
                        "--log-outputs", str(etcd.log_file),
                        "--quota-backend-bytes", str(256 * 1024 * 1024),
                        "--listen-metrics-urls", ""],
                       env={"GOMEMLIMIT": ETCD_MEMORY_LIMIT})
        api = self.process("kube-apiserver")
        if not api.is_running():
            notify(f"Starting kube-apiserver {binaries.version} on 127.0.0.1:{ports.api} "
                   f"(etcd on {ports.etcd})")
            api.workdir.mkdir(parents=True, exist_ok=True)
            api.start([str(binaries.apiserver),
                       f"--etcd-servers=http://127.0.0.1:{ports.etcd}",
                       "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                       f"--secure-port={ports.api}",
                       f"--tls-cert-file={self.pki / 'apiserver.pem'}",
                       f"--tls-private-key-file={self.pki / 'apiserver.key'}",
                       f"--client-ca-file={self.ca_file}",
                       f"--token-auth-file={self.pki / 'tokens.csv'}",
                       "--authorization-mode=RBAC",
                       f"--service-account-key-file={self.pki / 'sa.pub'}",
                       f"--service-account-signing-key-file={self.pki / 'sa.key'}",
                       "--service-account-issuer=https://kubernetes.default.svc",
                       "--service-cluster-ip-range=10.96.0.0/24",
                       "--endpoint-reconciler-type=none",
                       "--enable-priority-and-fairness=false",
                       "--profiling=false", "--v=1",
                       # Unused (the TLS files are given), but its path tells our process
                       # apart from any other kube-apiserver.
                       f"--cert-dir={api.workdir}"],
                      env={"GOMEMLIMIT": APISERVER_MEMORY_LIMIT})
        kube = self.client(ports)
        wait_until(kube.ready, deadline_s=120, what="kube-apiserver", log_file=api.console_file,
                   alive=api.is_running)
        self._write_kubeconfig(ports)

    def _ensure_pki(self) -> None:
        pki = self.pki
        pki.mkdir(parents=True, exist_ok=True)
        pki.chmod(0o700)
        if not self.ca_file.exists():
            _openssl(pki, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                     "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key", "-out",
                     "ca.pem", "-days", "3650", "-subj", "/CN=drctl lab kubernetes CA",
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        if not (pki / "apiserver.pem").exists():
            (pki / "apiserver.ext").write_text(
                "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
                "extendedKeyUsage=serverAuth\n"
                "subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                "IP:127.0.0.1,IP:10.96.0.1\n")
            _openssl(pki, "req", "-new", "-newkey", "ec", "-pkeyopt",
                     "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "apiserver.key",
                     "-out", "apiserver.csr", "-subj", "/CN=kube-apiserver")
            _openssl(pki, "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.pem", "-CAkey",
                     "ca.key", "-set_serial", f"0x{secrets.token_hex(8)}", "-days", "3650",
                     "-out", "apiserver.pem", "-extfile", "apiserver.ext")
        if not (pki / "sa.key").exists():
            _openssl(pki, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
                     "sa.key")
            _openssl(pki, "ec", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        if not self.token_file.exists():
            token = secrets.token_urlsafe(32)
            _write_private(self.token_file, token + "\n")
            # token,user,uid,"groups": system:masters is a cluster admin.
            _write_private(pki / "tokens.csv", f'{token},{TOKEN_USER},{TOKEN_USER},'
                                               '"system:masters"\n')

    def _write_kubeconfig(self, ports: KubePorts) -> None:
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "lab",
               "clusters": [{"name": "lab", "cluster": {
                   "server": self.url(ports), "certificate-authority": str(self.ca_file)}}],
               "users": [{"name": TOKEN_USER, "user": {
                   "token": self.token_file.read_text().strip()}}],
               "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": TOKEN_USER}}]}
        _write_private(self.kubeconfig, yaml.safe_dump(cfg, sort_keys=False))

    def down(self) -> list[str]:
        stopped = []
        for name in ("kube-apiserver", "etcd"):
            proc = self.process(name)
            if proc.is_running():
                proc.stop(grace_s=10)
                stopped.append(name)
            proc.pid_file.unlink(missing_ok=True)
        return stopped

    def rows(self, ports: KubePorts) -> list[dict[str, Any]]:
        rows = []
        for name, port in (("etcd", ports.etcd), ("kube-apiserver", ports.api)):
            proc = self.process(name)
            running = proc.is_running()
            rows.append({"name": name, "pid": proc.pid() if running else None,
                         "running": running, "port": port, "rss_bytes": proc.rss_bytes(),
                         "log": str(proc.log_file if name == "etcd" else proc.console_file)})
        return rows


def _write_private(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o600)


def _openssl(cwd: Path, *args: str) -> None:
    try:
        done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=60, check=False)
    except FileNotFoundError:
        raise LabError("openssl was not found; the Strimzi lab makes its API server's "
                       "certificates with it.", "Install OpenSSL (`apt-get install openssl`).") \
            from None
    if done.returncode != 0:
        raise LabError(f"openssl {args[0]} failed: {done.stderr.strip()[-400:]}",
                       f"Look into {cwd}.")


def main(argv: list[str] | None = None) -> int:
    """`python -m drctl.lab.kube build`: fill the cache (a test suite starts it in the
    background)."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["build"]:
        print("usage: python -m drctl.lab.kube build", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        found = kube_binaries(notify=lambda m: print(m, file=sys.stderr))
    except DrctlError as exc:
        print(f"{exc.message}\n{exc.hint or ''}", file=sys.stderr)
        return 1
    print(f"{found.apiserver} {found.etcd} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
