"""Addresses shown without their credentials: the one place that knows where a password hides.

An address may be a URL (``postgresql://user:secret@host/db``, ``redis://:secret@host/0``,
``https://mcp.example/mcp?api_key=secret``) or a libpq key=value string
(``host=db port=5432 user=broker password=secret``). :func:`safe_address` is the address with
every credential masked, for errors, logs, ``check`` and ``/readyz``; :func:`address_secrets`
gives the credential values themselves, so a driver's message that quotes one can be cleaned
(:func:`scrub`) and a log filter can mask them wherever they appear.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["MASK", "address_secrets", "is_key_value", "safe_address", "scrub"]

MASK = "***"
_MIN_SECRET_CHARS = 3  # masking every "1" or "on" would garble the text around it
# Names of query parameters and key=value keys whose values are credentials; the user name
# is not shown either, but it is no secret to mask in other text.
# A whole word of the name counts ("api_key", "X-Auth-Token"), so "keyword" or "passfile" do
# not, and a common value such as "true" is not masked all over the output.
_SENSITIVE = re.compile(
    r"(?:^|[_\-.])(?:api[_\-]?key|apikey|key|token|secret|pass|password|passwd|pwd|auth"
    r"|authorization|credentials?|sig|signature|session|session[_\-]?id|code)(?:$|[_\-.])"
    r"|^sslpassword$",
    re.IGNORECASE,
)
_HIDDEN = re.compile(_SENSITIVE.pattern + r"|^user$", re.IGNORECASE)
# libpq: key = value, the value bare or single-quoted with backslash escapes.
_PAIR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*('(?:[^'\\]|\\.)*'?|[^\s']*)")


def is_key_value(address: str) -> bool:
    """Whether ``address`` is a libpq key=value string rather than a URL."""
    return "://" not in address and _PAIR.match(address.strip()) is not None


def _unquote_pq(value: str) -> str:
    if value.startswith("'"):
        return re.sub(r"\\(.)", r"\1", value[1:].removesuffix("'"))
    return value


def _key_value_pairs(address: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _PAIR.finditer(address)]


def safe_address(address: str) -> str:
    """``address`` with its user and password and every credential-like parameter masked
    (host, port, path and the other parameters are kept, so it still says where)."""
    if is_key_value(address):
        pairs = _key_value_pairs(address)
        return " ".join(f"{k}={MASK if _HIDDEN.search(k) else v}" for k, v in pairs)
    try:
        parts = urlsplit(address)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(unreadable address)"
    if not parts.scheme:
        return "(unreadable address)"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    user = f"{MASK}@" if "@" in parts.netloc else ""
    query = "&".join(
        f"{k}={MASK if _HIDDEN.search(k) else v}"
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
    )
    tail = f"?{query}" if query else ""
    return f"{parts.scheme}://{user}{host}{port}{parts.path}{tail}"


def address_secrets(address: str) -> set[str]:
    """The credential values ``address`` holds (raw and decoded), at least 3 characters."""
    found: set[str] = set()
    if is_key_value(address):
        for key, value in _key_value_pairs(address):
            if _SENSITIVE.search(key):
                found |= {value, _unquote_pq(value)}
    else:
        try:
            parts = urlsplit(address)
            password = parts.password
        except ValueError:
            return {address} if len(address) >= _MIN_SECRET_CHARS else set()
        if password:
            found |= {password, unquote(password)}
        for pair in parts.query.split("&"):
            key, _, value = pair.partition("=")
            if value and _SENSITIVE.search(unquote(key)):
                found |= {value, unquote(value.replace("+", " "))}
    return {s for s in found if len(s) >= _MIN_SECRET_CHARS}


def scrub(text: str, address: str) -> str:
    """``text`` (a driver's or client's message) with ``address`` shown safely and each of
    its credentials masked."""
    if address and address in text:
        text = text.replace(address, safe_address(address))
    for secret in sorted(address_secrets(address), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
