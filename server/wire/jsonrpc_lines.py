"""JSON-RPC over newline-delimited lines: the one module that frames messages, for the host's
stdio (``transport.stdio``), the pass-through (``transport.passthrough``) and stdio downstream
servers (``gateway.stdio_link``). It splits byte streams into lines, reads a line into a
message with bounds, writes messages, requests, results and errors as lines, and keys ids.

Lines come from a host over stdio and from downstream servers. None of them reaches a
recursive parser before :func:`too_deep` has checked its nesting, so a line nesting thousands
of levels costs an error answer, not the process. :func:`read_message` turns a host's line
into a message, repairing what a host cannot help (a lone UTF-16 surrogate, an emoji cut in
half, becomes U+FFFD), or into a :class:`Rejected` that says how to answer:

- ``-32700`` parse error: not JSON, nesting deeper than :data:`MAX_DEPTH`, a number of more
  than 4,300 digits;
- ``-32600`` invalid request: ``jsonrpc`` not ``"2.0"``, ``method`` missing or not a string;
- ``-32602`` invalid params: ``params`` not an object.

A rejection is answered under the line's ``id`` when it can be read and is an integer or a
string. A response is never answered, nor is a notification: a line that is JSON without an
``id``, or one whose top-level object can be read to its end without finding one. A parse
error whose id cannot be read (the line breaks off, or a broken string swallows the rest) is
answered under ``"id": null``, as JSON-RPC 2.0 requires: its sender may be waiting, and a
host ignores an answer it cannot match. A JSON value that is a request with an unusable id
(``null``, a fraction, a bool, an object) is logged and skipped. A batch (a JSON array) gets
the answer HTTP gives, ``-32600`` under ``"id": null``: batches are not part of the protocol
since 2025-06-18, and its sender waits for an answer it cannot match by id.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import mcp_types as types
from pydantic import ValidationError

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "NO_ID",
    "LineSplitter",
    "Rejected",
    "RequestKey",
    "encode_line",
    "error_line",
    "id_key",
    "message_line",
    "notification_line",
    "peer_message",
    "read_message",
    "read_object",
    "request_line",
    "result_line",
    "safe_loads",
    "too_deep",
    "top_level_id",
    "usable_id",
]

MAX_DEPTH: Final = 128
"""Deepest nesting of arrays and objects read from outside (a tool schema needs a few dozen)."""
MAX_LINE_BYTES: Final = 256 * 1024 * 1024
"""The longest line (one JSON-RPC message) read from a host or a downstream server."""

NO_ID: Final = object()
"""What :func:`top_level_id` returns for a line without a readable ``id``."""

RequestKey: TypeAlias = tuple[type, int | str]
"""A request id as a dict key: ``1`` and ``"1"`` stay distinct (see :func:`id_key`)."""

_MAX_DIGITS = 4300  # Python's own limit for int(str), and the SDK's JSON reader's
_MAX_TOKENS = 100_000  # an id hunt in a broken line stops here (ids come first or last)
_STRING_PATTERN = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRING = re.compile(_STRING_PATTERN, re.S)
# one token each: a string, an opening, a closing, ":" or ",", a bare literal, or junk
_TOKEN = re.compile(
    rb"\s*(?:(" + _STRING_PATTERN + rb')|([\[{])|([\]}])|([:,])|([^\s\[\]{}:,"]+)|(.))', re.S
)
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class _NumberOutOfRange(ValueError):
    pass


@dataclass(frozen=True)
class Rejected:
    """A line that is no usable message: answer ``code``/``message`` under ``request_id``,
    or, when ``request_id`` is None, log ``message`` and skip the line (unless ``null_id``:
    then answer under ``"id": null``)."""

    request_id: int | str | None
    code: int
    message: str
    null_id: bool = False

    @property
    def answered(self) -> bool:
        """Whether the line gets an error response (else it is logged and skipped)."""
        return self.request_id is not None or self.null_id


def usable_id(value: object) -> bool:
    """Whether ``value`` can be a request id here (an integer or a string, not a bool)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def too_deep(line: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether ``line`` nests arrays and objects deeper than ``limit`` (strings ignored).

    Costs two ``bytes.count`` for a line with few brackets; otherwise strips the strings and
    peels one level of empty pairs per round, all in C, at most ``limit`` rounds.
    """
    if line.count(b"[") + line.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", line).translate(_BRACKETS, _NOT_BRACKETS)
    for depth in range(limit + 1):
        if not brackets:
            return False
        peeled = brackets.replace(b"[]", b"")
        if peeled == brackets:  # unbalanced: "]]...[[" is left, each "[" may open a level
            return depth + brackets.count(b"[") > limit
        brackets = peeled
    return True


def safe_loads(data: bytes | str) -> Any:
    """``json.loads`` that raises ``ValueError`` (never ``RecursionError``) for a value
    nesting deeper than :data:`MAX_DEPTH`."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if too_deep(raw):
        raise ValueError(f"JSON nests deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError(f"JSON nests deeper than {MAX_DEPTH} levels") from None


def top_level_id(line: bytes) -> tuple[object, frozenset[bytes]]:
    """The ``id`` member of the top-level object in ``line`` (or :data:`NO_ID`) and the raw
    top-level keys seen, read token by token without parsing the values, so it works on lines
    that are too deep, cut short or otherwise broken after the id."""
    found, keys, _complete = _scan_top_level(line)
    return found, keys


def _scan_top_level(line: bytes) -> tuple[object, frozenset[bytes], bool]:
    """:func:`top_level_id`, and whether the scan reached the end of the top-level object
    (so a missing ``id`` is known to be missing, not lost in a broken line)."""
    depth, key, colon = 0, b"", False
    keys: set[bytes] = set()
    found: object = NO_ID
    for count, match in enumerate(_TOKEN.finditer(line)):
        string, opening, closing, punct, bare, junk = match.groups()
        if junk is not None or count > _MAX_TOKENS or (count == 0 and opening != b"{"):
            break
        if opening is not None:
            depth, key, colon = depth + 1, b"", False
        elif closing is not None:
            depth -= 1
            if depth <= 0:
                return found, frozenset(keys), depth == 0
        elif depth != 1:
            continue
        elif punct is not None:
            colon = punct == b":" and bool(key)
            key = key if colon else b""
        elif colon:
            if key == b'"id"' and found is NO_ID:
                found = _scalar(string or bare)
            key, colon = b"", False
        else:
            key = string or b""
            keys.add(key)
    return found, frozenset(keys), False


def _scalar(token: bytes | None) -> object:
    try:
        return json.loads(token) if token is not None else NO_ID
    except ValueError:
        return NO_ID


def read_message(line: bytes) -> types.JSONRPCMessage | Rejected:
    """The message in one line from a host, or how to answer (or skip) it."""
    if too_deep(line):
        detail = f"message nests deeper than {MAX_DEPTH} levels; send flatter params"
        return _rejected_raw(line, types.PARSE_ERROR, detail)
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        pass
    else:
        if not isinstance(message, types.JSONRPCNotification) or b'"id"' not in line:
            return message
        # A request whose id is null, a fraction or a bool passes as a notification.
        return _check_object(json.loads(line))
    text = line.decode("utf-8", errors="replace")
    try:
        data = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except _NumberOutOfRange as exc:
        return _rejected_raw(line, types.PARSE_ERROR, f"{exc}; send such numbers as strings")
    except json.JSONDecodeError as exc:
        problem = exc.msg.removesuffix(" at")
        detail = f"invalid JSON ({problem} at character {exc.pos}); send one JSON message per line"
        return _rejected_raw(line, types.PARSE_ERROR, detail)
    except (ValueError, RecursionError) as exc:  # pragma: no cover - depth is checked above
        return _rejected_raw(line, types.PARSE_ERROR, f"invalid JSON: {exc}")
    return _check_object(data)


def _int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_DIGITS:
        raise _NumberOutOfRange(f"a number of {len(text)} digits is longer than {_MAX_DIGITS}")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NumberOutOfRange(f"the number {text[:20]!r}... is out of range")
    return value


def _constant(text: str) -> float:
    raise _NumberOutOfRange(f"{text!r} is not a JSON number")


def _rejected_raw(line: bytes, code: int, message: str) -> Rejected:
    """A line that is not JSON: answered under its id when one can be read, skipped when it
    is a response or a whole object without an ``id`` (a notification), and otherwise
    answered under ``"id": null``, as JSON-RPC 2.0 says for an id that cannot be detected."""
    request_id, keys, complete = _scan_top_level(line)
    if b'"method"' not in keys and keys & {b'"result"', b'"error"'}:
        return Rejected(None, code, message)
    if usable_id(request_id):
        return Rejected(request_id, code, message)  # type: ignore[arg-type]
    notification = complete and b'"id"' not in keys
    return Rejected(None, code, message, null_id=not notification)


def _check_object(data: object) -> types.JSONRPCMessage | Rejected:
    if isinstance(data, list):
        detail = (
            "a JSON-RPC batch; batches are not supported since protocol version 2025-06-18, "
            "send each message on its own line"
        )
        return Rejected(None, types.INVALID_REQUEST, detail, null_id=True)
    if not isinstance(data, dict):
        kind = type(data).__name__
        return Rejected(None, types.INVALID_REQUEST, f"a {kind}, not a JSON-RPC message object")
    request_id = data.get("id")
    if "method" not in data and ("result" in data or "error" in data):
        return Rejected(None, types.INVALID_REQUEST, "a malformed response")
    answer_id = request_id if usable_id(request_id) else None
    if "id" in data and answer_id is None:
        detail = f"'id' must be an integer or a string, got {_short(request_id)}"
        return Rejected(None, types.INVALID_REQUEST, detail)
    if data.get("jsonrpc") != "2.0":
        detail = f"'jsonrpc' must be '2.0', got {_short(data.get('jsonrpc'))}"
        return Rejected(answer_id, types.INVALID_REQUEST, detail)
    method = data.get("method")
    if not isinstance(method, str):
        got = f"got {_short(method)}" if "method" in data else "it is missing"
        detail = f"'method' must be a string naming the method; {got}"
        return Rejected(answer_id, types.INVALID_REQUEST, detail)
    params = data.get("params")
    if params is not None and not isinstance(params, dict):
        detail = f"'params' of {method[:50]!r} must be a JSON object, got {type(params).__name__}"
        return Rejected(answer_id, types.INVALID_PARAMS, detail)
    repaired = json.dumps(data, ensure_ascii=False)
    try:
        repaired.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates, as from an emoji cut in half: U+FFFD
        repaired = repaired.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    try:
        return types.jsonrpc_message_adapter.validate_json(repaired, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "message"
        detail = f"invalid {where}: {first['msg']}"
        return Rejected(answer_id, types.INVALID_REQUEST, detail[:300])


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def encode_line(message: dict[str, Any]) -> bytes:
    """One JSON line; text that is not valid Unicode (lone surrogates) goes out escaped."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"


def error_line(request_id: int | str | None, code: int, message: str, data: Any = None) -> bytes:
    """A JSON-RPC error response as one line (``None``: under ``"id": null``), with ``data``
    when it is not None."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return encode_line({"jsonrpc": "2.0", "id": request_id, "error": error})


def result_line(request_id: int | str, result: dict[str, Any]) -> bytes:
    """A JSON-RPC result response as one line."""
    return encode_line({"jsonrpc": "2.0", "id": request_id, "result": result})


def request_line(request_id: int | str, method: str, params: dict[str, Any]) -> bytes:
    """A JSON-RPC request as one line."""
    return encode_line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def notification_line(method: str, params: dict[str, Any]) -> bytes:
    """A JSON-RPC notification as one line."""
    return encode_line({"jsonrpc": "2.0", "method": method, "params": params})


def message_line(message: types.JSONRPCMessage) -> bytes:
    """A message model as one line, as the SDK writes it (by alias, unset fields left out);
    ``ValueError`` when it cannot be encoded as JSON."""
    return message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"


def peer_message(line: bytes) -> types.JSONRPCMessage:
    """The message in one line from a downstream server; ``ValueError`` when the line is
    none (not JSON, not a JSON-RPC message, nesting deeper than :data:`MAX_DEPTH`)."""
    if too_deep(line):
        raise ValueError(f"message nests deeper than {MAX_DEPTH} levels")
    try:
        return types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except RecursionError:  # pragma: no cover - depth is checked above
        raise ValueError(f"message nests deeper than {MAX_DEPTH} levels") from None


def read_object(line: bytes) -> dict[str, Any] | None:
    """The JSON object in ``line`` (bounded like :func:`safe_loads`), None if it is none."""
    try:
        message = safe_loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def id_key(request_id: object) -> RequestKey | None:
    """A request id as a dict key, None if ``request_id`` cannot be an id here."""
    if not usable_id(request_id):
        return None
    return (type(request_id), request_id)  # type: ignore[return-value]


class LineSplitter:
    """Complete non-blank lines out of a byte stream read in chunks.

    A line arriving in many chunks is joined once, when its end arrives (never re-copied
    per chunk). A line longer than ``limit`` bytes is dropped whole, up to its end, and
    counted in :attr:`skipped`: a peer cannot make the reader hold more than ``limit``."""

    __slots__ = ("_limit", "_parts", "_size", "_skipping", "skipped")

    def __init__(self, limit: int = MAX_LINE_BYTES) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False
        self.skipped = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes (without their newline); the rest waits."""
        *ends, rest = chunk.split(b"\n")
        lines = []
        for end in ends:
            line = b"".join((*self._parts, end)) if self._parts else end
            dropped, self._skipping = self._skipping, False
            self._parts, self._size = [], 0
            if dropped or len(line) > self._limit:
                self.skipped += 0 if dropped else 1
            elif line.strip():
                lines.append(line)
        if rest and not self._skipping:
            self._parts.append(rest)
            self._size += len(rest)
            if self._size > self._limit:  # too long already: drop what came, skip to its end
                self._parts, self._size, self._skipping = [], 0, True
                self.skipped += 1
        return lines
