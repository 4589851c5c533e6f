"""A kubeconfig read into a login: static credentials only, secrets never in a message."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.errors import ConfigError
from drctl.kube.api import KubeClient, KubeRejected
from drctl.kube.kubeconfig import KubeLogin, in_cluster_login, load_login
from tests.unit.kube_fake import fake_kube


def _kubeconfig(tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None,
                current: str = "lab") -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": current,
           "clusters": [{"name": "lab", "cluster": cluster or {"server": "http://127.0.0.1:1"}}],
           "users": [{"name": "drctl", "user": user}],
           "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "drctl",
                                                    "namespace": "secondary"}},
                        {"name": "other", "context": {"cluster": "lab", "user": "drctl"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_token_and_current_context(tmp_path: Path) -> None:
    login = load_login(str(_kubeconfig(tmp_path, {"token": "abc-secret"})))
    assert (login.server, login.token, login.namespace) == ("http://127.0.0.1:1", "abc-secret",
                                                             "secondary")
    assert "abc-secret" not in repr(login)  # never printed
    assert load_login(str(_kubeconfig(tmp_path, {"token": "t"})), "other").namespace is None


def test_token_file_is_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file\n")
    login = load_login(str(_kubeconfig(tmp_path, {"tokenFile": "token"})))
    assert login.token == "from-file"


@pytest.mark.parametrize("plugin", ["exec", "auth-provider"])
def test_login_plugins_are_refused_with_what_to_do(tmp_path: Path, plugin: str) -> None:
    path = _kubeconfig(tmp_path, {plugin: {"command": "aws"}})
    with pytest.raises(ConfigError) as info:
        load_login(str(path))
    assert f"{plugin} plugin, which drctl does not run" in str(info.value)
    assert "kubectl create token" in (info.value.hint or "")


def test_an_unknown_context_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_login(str(_kubeconfig(tmp_path, {"token": "t"})), "prod")
    assert "no context named 'prod'" in str(info.value)


def test_bad_ca_data_is_a_config_error(tmp_path: Path) -> None:
    bad = base64.b64encode(b"not a certificate").decode()
    path = _kubeconfig(tmp_path, {"token": "t"}, {"server": "https://127.0.0.1:1",
                                                  "certificate-authority-data": bad})
    with pytest.raises(ConfigError) as info:
        load_login(str(path))
    assert "TLS settings" in str(info.value)


def test_insecure_skip_tls_verify_turns_verification_off(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, {"token": "t"}, {"server": "https://127.0.0.1:1",
                                                  "insecure-skip-tls-verify": True})
    login = load_login(str(path))
    assert login.tls is not None and login.tls.check_hostname is False


def test_in_cluster_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "namespace").write_text("dr")
    login = in_cluster_login(tmp_path)
    assert (login.server, login.token, login.namespace) == ("https://10.0.0.1:6443",
                                                             "sa-token", "dr")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    with pytest.raises(ConfigError, match="not in a Kubernetes pod"):
        in_cluster_login(tmp_path)


def test_a_refused_token_is_a_usage_error_without_the_token() -> None:
    with fake_kube() as (_, _, url):
        client = KubeClient(KubeLogin(url, "t", token="wrong-token-value"))
        with pytest.raises(KubeRejected) as info:
            client.get("/apis/kafka.strimzi.io")
    assert "refused drctl" in info.value.message
    assert "wrong-token-value" not in str(info.value)
