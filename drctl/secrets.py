"""Secrets by reference (`${env:NAME}`, `${file:/path}`, `${file:/path.properties:key}`) and
masking of everything secret-looking.

drctl never prints or writes a secret: every output path (tables, JSON, journals, reports) goes
through `mask_mapping` or `Redactor.redact`.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from drctl.jsonable import to_jsonable
from drctl.properties import read_properties
from drctl.suggest import did_you_mean_aside

MASK = "****"

_SECRET_KEY = re.compile(
    r"(password|passwd|secret|token|jaas|ssl\.key|keystore|credential|api[._-]?key|"
    r"user\.info|private)",
    re.IGNORECASE,
)
_REFERENCE = re.compile(r"\$\{(env|file):([^}]+)\}")
# The user-info of a URL (`https://user:pass@host/`): the password never shows, the user does.
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/@\s:]*):"
                           r"(?P<password>[^/@\s]+)@")
# A Spark Connect URL's bearer token (`sc://host:15002/;use_ssl=true;token=...`); one
# written as a reference names where the secret is, and shows.
_URL_TOKEN = re.compile(r"(?P<name>;token=)(?P<token>(?!\$\{)[^;\s]+)", re.IGNORECASE)


def mask_url_userinfo(text: str) -> str:
    """Every `scheme://user:password@` in `text` as `scheme://user:****@`, and a Spark Connect
    URL's `;token=...` as `;token=****`."""
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    return _URL_TOKEN.sub(lambda m: f"{m['name']}{MASK}", text)


def url_token(url: str) -> str | None:
    """The `;token=` of a Spark Connect URL, if it has one."""
    found = _URL_TOKEN.search(url)
    return found["token"] if found else None


class UnresolvedReference(ValueError):
    """A `${env:...}` or `${file:...}` that names nothing."""


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    # Cached: a large result (160,000 positions) asks it of the same few names a million times.
    return bool(_SECRET_KEY.search(key))


def is_reference(value: Any) -> bool:
    """Whether `value` is one `${env:NAME}` or `${file:...}` and nothing else: it names where
    a secret is, not the secret, so it may be shown (and `config show` output fed back)."""
    return isinstance(value, str) and _REFERENCE.fullmatch(value.strip()) is not None


def resolve_references(value: str) -> str:
    """Replace every reference in `value` with what it names: `${env:NAME}` an environment
    variable, `${file:/path}` a whole file (without its last newline), `${file:/path:key}` the
    value of `key` in a Java properties file (Kafka's FileConfigProvider syntax: the path ends
    at the first ':')."""

    def substitute(match: re.Match[str]) -> str:
        kind, name = match.group(1), match.group(2).strip()
        if kind == "env":
            if name not in os.environ:
                raise UnresolvedReference(f"environment variable {name} is not set")
            return os.environ[name]
        file, colon, key = name.partition(":")
        path = Path(file).expanduser()
        try:
            if not colon:
                return path.read_text(encoding="utf-8").rstrip("\n")
            props = read_properties(path)
        except OSError as exc:
            raise UnresolvedReference(f"cannot read {path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise UnresolvedReference(f"{path} is not UTF-8 text: {exc.reason}") from exc
        if key not in props:
            raise UnresolvedReference(f"{path} has no property '{key}'"
                                      f"{did_you_mean_aside(key, props)}")
        return props[key]

    return _REFERENCE.sub(substitute, value)


def mask_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy with secret-looking keys masked, recursively."""
    masked: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            masked[key] = mask_mapping(value)
        elif is_secret_key(str(key)) and value not in (None, "") and not is_reference(value):
            masked[key] = MASK
        elif isinstance(value, str):
            masked[key] = mask_url_userinfo(value)
        else:
            masked[key] = value
    return masked


# How many short texts a Redactor remembers having masked.
_MASKED_KEPT = 100_000


class Redactor:
    """Replaces known secret values inside free text (error messages, shell output, journals)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)
        # Texts already masked: a large result repeats the same names (groups, topics)
        # hundreds of thousands of times.
        self._masked: dict[str, str] = {}

    def add(self, secret: str) -> None:
        if len(secret) >= 4 and secret not in self._secrets:
            self._secrets.append(secret)
            self._secrets.sort(key=len, reverse=True)
            self._masked.clear()

    def redact(self, text: str) -> str:
        masked = self._masked.get(text)
        if masked is not None:
            return masked
        masked = text
        for secret in self._secrets:
            masked = masked.replace(secret, MASK)
        masked = mask_url_userinfo(masked)
        if len(text) <= 256 and len(self._masked) < _MASKED_KEPT:
            self._masked[text] = masked
        return masked

    def plain_data(self, data: Any) -> Any:
        """`redact_data(to_jsonable(data))` in one walk: what every output of data goes
        through (a translation's result has millions of values)."""
        kind = type(data)
        if kind is str:
            return self.redact(data)
        if data is None or kind is int or kind is float or kind is bool:
            return data
        if kind is dict:
            out = {}
            for k, v in data.items():
                key = str(k)
                if type(v) is not str and is_secret_key(key):
                    # What the value becomes decides whether the key masks it.
                    out[key] = self.redact_data({key: to_jsonable(v)})[key]
                elif type(v) is str and v and is_secret_key(key) and not is_reference(v):
                    out[key] = MASK
                else:
                    out[key] = self.plain_data(v)
            return out
        if kind is list or kind is tuple:
            return [self.plain_data(v) for v in data]
        return self.redact_data(to_jsonable(data))  # dates, paths, enums, bytes, sets

    def redact_data(self, data: Any) -> Any:
        """Redact strings anywhere inside JSON-like data; mask secret-looking keys too."""
        if isinstance(data, str):
            return self.redact(data)
        if data is None or type(data) in (int, float, bool):
            return data
        if isinstance(data, Mapping):
            return {
                k: (MASK if is_secret_key(str(k)) and isinstance(v, str) and v
                    and not is_reference(v) else self.redact_data(v))
                for k, v in data.items()
            }
        if isinstance(data, (list, tuple)):
            return [self.redact_data(v) for v in data]
        return data
