"""What every HTTP endpoint drctl calls (Kafka Connect, a schema registry) is configured with:
credentials in the URL or beside it, and TLS against a CA file with an optional client
certificate. One place, so both speak to secured endpoints the same way."""

from __future__ import annotations

import base64
import ssl
import urllib.parse

from drctl.errors import ConfigError


def split_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """(url without user-info, user, password) of `scheme://user:password@host/...`."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, None, None
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    bare = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query,
                                    parts.fragment))
    return bare, urllib.parse.unquote(parts.username), (
        urllib.parse.unquote(parts.password) if parts.password is not None else None)


def authorization(username: str | None, password: str | None,
                  token: str | None) -> str | None:
    """The Authorization header: basic with a username, bearer with a token, else none."""
    if username is not None:
        basic = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
        return f"Basic {basic}"
    if token is not None:
        return f"Bearer {token}"
    return None


def tls_context(ca_file: str | None, cert_file: str | None, key_file: str | None,
                config_path: str | None, *, keys: str = "replication.connect",
                what: str = "Kafka Connect") -> ssl.SSLContext:
    """Verification against the system CAs, or `ca_file`'s; a client certificate when set.
    A file that cannot be used is a config error naming its key (under `keys`)."""
    key = f"{keys}.ca_file"
    try:
        context = ssl.create_default_context(cafile=ca_file)
        if cert_file is not None:
            key = f"{keys}.cert_file"
            context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"cannot use it for {what}'s TLS: {reason}", path=config_path,
                          key=key, hint="Point it at a readable PEM file.") from exc
    return context
