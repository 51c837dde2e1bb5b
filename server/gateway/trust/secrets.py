"""``${env:NAME}`` expansion in downstream configs, and the redactor that keeps secrets out.

Every value a ``${env:NAME}`` reference expands to is a secret, but for the variables that only
say where things are (``HOME``, ``USER``, ``PATH``, ``TMPDIR``, ``XDG_*``, ...: masking them
would hide every path in every message); so is every literal value of a header or environment
variable whose name looks like a credential (``Authorization``, ``*TOKEN*``, ``*KEY*``, ...),
and every credential in a server's URL (``user:pass@``, ``?api_key=...``). The
:class:`Redactor` replaces each of them with ``***`` in any text, JSON value or pydantic model;
the gateway passes every error, log line, status field and downstream result through it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from context_broker.server.redaction import address_secrets
from context_broker.server.settings import DownstreamConfig, OAuthConfig
from pydantic import BaseModel

from ..errors import SecretError

__all__ = ["MASK", "RedactingFilter", "Redactor", "expand_env", "expand_server"]

MASK = "***"
MIN_SECRET_CHARS = 4
"""Shorter values are not scrubbed: masking every ``1`` or ``on`` would garble all output."""

_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_SENSITIVE = re.compile(r"auth|token|key|secret|passw|cookie|credential|session", re.IGNORECASE)
_PLACES = frozenset(
    {"HOME", "USER", "USERNAME", "LOGNAME", "PATH", "PWD", "SHELL", "TMPDIR", "TEMP", "TMP"}
    | {"LANG", "HOSTNAME", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "PROGRAMDATA"}
)
"""Variables that say where things are, not secrets (``XDG_*`` and ``LC_*`` too)."""


def _is_place(name: str) -> bool:
    return name in _PLACES or name.startswith(("XDG_", "LC_"))


M = TypeVar("M", bound=BaseModel)


def expand_env(
    text: str, environ: Mapping[str, str], *, where: str, server: str | None = None
) -> tuple[str, list[str]]:
    """``text`` with each ``${env:NAME}`` replaced; also the substituted values that are
    secrets (all but those of the variables that say where things are, such as ``HOME``).

    Raises ``SecretError`` naming the variable (never a value) when one is unset.
    """
    found: list[str] = []

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise SecretError(
                f"{where}: environment variable {name!r} is not set; export it before "
                "starting the broker or remove the ${env:...} reference",
                server=server,
            )
        if not _is_place(name):
            found.append(environ[name])
        return environ[name]

    return _REF.sub(sub, text), found


def expand_server(
    name: str, config: DownstreamConfig, environ: Mapping[str, str]
) -> tuple[DownstreamConfig, set[str]]:
    """The config with references expanded in command, args, env, cwd, url and headers, and the
    set of secret values it now holds."""
    secrets: set[str] = set()
    prefix = f"servers.{name}"

    def one(text: str, where: str) -> str:
        value, found = expand_env(text, environ, where=f"{prefix}.{where}", server=name)
        secrets.update(found)
        return value

    def table(values: Mapping[str, str], where: str) -> dict[str, str]:
        out = {}
        for key, raw in values.items():
            out[key] = one(raw, f"{where}.{key}")
            if _SENSITIVE.search(key):
                secrets.add(out[key])
                _scheme, _, credential = out[key].partition(" ")  # "Bearer <token>"
                secrets.add(credential)
        return out

    update: dict[str, Any] = {
        "args": tuple(one(a, f"args[{i}]") for i, a in enumerate(config.args)),
        "env": table(config.env, "env"),
        "headers": table(config.headers, "headers"),
    }
    if config.command is not None:
        update["command"] = one(config.command, "command")
    if config.url is not None:
        update["url"] = one(config.url, "url")
        # Credentials written into the URL itself (user:pass@, ?api_key=...) are secrets too.
        secrets.update(address_secrets(update["url"]))
    if config.cwd is not None:
        update["cwd"] = type(config.cwd)(one(str(config.cwd), "cwd"))
    if config.oauth is not None:
        update["oauth"] = _expand_oauth(config.oauth, one, secrets)
    return config.model_copy(update=update), {s for s in secrets if len(s) >= MIN_SECRET_CHARS}


def _expand_oauth(
    oauth: OAuthConfig, one: Callable[[str, str], str], secrets: set[str]
) -> OAuthConfig:
    """The ``oauth`` table with references expanded; its client secret and key are secrets."""
    update: dict[str, Any] = {}
    for key in ("client_id", "client_secret", "private_key_pem"):
        raw = getattr(oauth, key)
        if raw is not None:
            update[key] = one(raw, f"oauth.{key}")
            if key != "client_id":
                secrets.add(update[key])
    return oauth.model_copy(update=update)


class Redactor:
    """Replaces known secret values with ``***``; shared by everything in one gateway."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Start scrubbing more values (shorter than ``MIN_SECRET_CHARS`` are ignored)."""
        new = {s for s in secrets if len(s) >= MIN_SECRET_CHARS} - self._secrets
        if not new:
            return
        self._secrets |= new
        ordered = sorted(self._secrets, key=len, reverse=True)  # longest first: no partial masks
        self._pattern = re.compile("|".join(re.escape(s) for s in ordered))

    def __bool__(self) -> bool:
        return self._pattern is not None

    def redact(self, text: str) -> str:
        """``text`` with every secret masked."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    def redact_json(self, value: Any) -> Any:
        """A JSON-like value with every string (keys too) masked; unchanged objects are reused."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_json(v) for v in value]
        if isinstance(value, dict):
            return {self.redact(str(k)): self.redact_json(v) for k, v in value.items()}
        return value

    def contains_secret(self, value: Any) -> bool:
        """Whether any string inside a JSON-like value holds a secret."""
        if self._pattern is None:
            return False
        if isinstance(value, str):
            return self._pattern.search(value) is not None
        if isinstance(value, list):
            return any(self.contains_secret(v) for v in value)
        if isinstance(value, dict):
            return any(self.contains_secret(k) or self.contains_secret(v) for k, v in value.items())
        return False

    def redact_model(self, model: M) -> M:
        """A pydantic model with secrets masked; the same object when it holds none."""
        if self._pattern is None:
            return model
        data = model.model_dump(by_alias=True, mode="json", exclude_unset=True)
        if not self.contains_secret(data):
            return model
        return type(model).model_validate(self.redact_json(data), by_name=False)

    def filter(self) -> RedactingFilter:
        """A logging filter that masks secrets in every record it sees (attach it to handlers)."""
        return RedactingFilter(self)


class RedactingFilter(logging.Filter):
    """Rewrites a log record's message (and formatted traceback) with secrets masked."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._redactor:
            return True
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.msg, record.args = self._redactor.redact(message), None
        if record.exc_text:
            record.exc_text = self._redactor.redact(record.exc_text)
        return True
