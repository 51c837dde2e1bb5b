"""Sessions in Redis, shared by every broker replica that points at the same server.

Every write is one Lua script (or a ``WATCH``/``MULTI``/``EXEC`` transaction for the small JSON
parts, whose new value is computed here): Redis runs a script alone, so writers to one session
from any number of processes never interleave, sequence numbers come from ``HINCRBY`` or
``RPUSH`` inside the script, and nothing is read and rewritten whole.

Durability is the server's: with ``appendonly yes`` and ``appendfsync always`` Redis writes a
command to its append-only file and fsyncs it before it replies, so an acknowledged write
survives a crash of the server or the machine. With ``appendfsync everysec`` (Redis' default
when the AOF is on) up to a second of acknowledged writes can be lost; without the AOF, all
writes since the last snapshot. Opening the store logs a warning when the server is not set up
for ``always``.

Keys (prefix ``cb:``; a session's keys share the hash tag ``{session_id}``)::

    cb:version                       schema version of this layout
    cb:sessions, cb:session_ord      zset of session ids by creation order, and its counter
    cb:s:{id}:h                      hash: meta (JSON), next_msg, msg_total, msg_tokens
    cb:s:{id}:items / :item          list of ref keys in order / hash ref key -> item JSON
    cb:s:{id}:removed                list of ref keys removed by hand
    cb:s:{id}:turns / :turnidx       list of turn JSON / hash request id -> seq
    cb:s:{id}:msg / :msgseq          hash seq -> message JSON / zset of seqs
    cb:s:{id}:msgmeta                hash seq -> [message id, tool call ids, tokens]
    cb:s:{id}:msgids / :callids      hash message id -> seq / hash tool call id -> seq
    cb:s:{id}:parts                  hash "history" / "snapshot" -> JSON
    cb:s:{id}:calls / :usage         list of call JSON / list of usage event seqs
    cb:usage                         list of every usage event (index = seq; '' once deleted)
    cb:emb:<model>                   hash text hash -> float32 vector bytes
    cb:oauth                         hash server name -> OAuth token entry (see _tokens.py)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import redis

from contextcore import store
from contextcore.items import ItemRef, parse_item_type
from contextcore.sessions import RequestContext, RequestItem, SessionItem

from ._records import (
    Unreadable,
    call_of,
    damaged_in,
    decoded,
    message_value,
    readable,
    stored_tokens,
    turn_of,
)
from ._redis_scripts import SCRIPTS
from ._shared import dumps, no_repeats, ref_key
from ._urls import describe_url, scrub

__all__ = ["SCHEMA_VERSION", "RedisSessionStore"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # 2: message counts and token sums kept per session (see _count_v1)
_P = "cb:"


def _ref(key: bytes | str) -> ItemRef:
    kind, name, server = json.loads(key)
    return ItemRef(parse_item_type(kind), name, server)


class _Keys:
    """The keys of one session."""

    def __init__(self, session_id: str) -> None:
        base = f"{_P}s:{{{session_id}}}:"
        self.h, self.items, self.item = base + "h", base + "items", base + "item"
        self.removed, self.turns, self.turnidx = base + "removed", base + "turns", base + "turnidx"
        self.msg, self.msgseq, self.msgmeta = base + "msg", base + "msgseq", base + "msgmeta"
        self.msgids, self.callids = base + "msgids", base + "callids"
        self.parts, self.calls, self.usage = base + "parts", base + "calls", base + "usage"


class RedisSessionStore(store.SessionStore):
    """A session store in a Redis server (safe across threads and processes)."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self._records = records = _RedisRecords(url, timeout=timeout)
        super().__init__(*[records] * store.ROLES)  # one object plays every role
        self.where = records.where


class _RedisRecords(store.JsonParts):
    """Every role's records of one Redis server, on one client."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self._url = url
        self.where = describe_url(url)
        self._damage = store.DamageLog(self.where)
        self._r = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, health_check_interval=30
        )
        self._scripts = {name: self._r.register_script(src) for name, src in SCRIPTS.items()}
        try:
            with self._guard():
                self._check_version()
                self._check_durability()
        except BaseException:
            self._r.close()
            raise

    # -- plumbing ---------------------------------------------------------------------------

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Turn the client's errors into store errors that name the server, never the URL."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise store.StoreUnavailable(
                f"the Redis session store at {self.where!r} cannot be reached "
                f"({scrub(str(exc), self._url)}); check that the server runs and "
                "[persistence] url"
            ) from None
        except redis.ReadOnlyError:
            raise store.StoreUnavailable(
                f"the Redis session store at {self.where!r} is a read-only replica; point "
                "[persistence] url at the primary"
            ) from None
        except redis.ResponseError as exc:
            text = scrub(str(exc), self._url)
            if text.startswith(("MISCONF", "NOAUTH", "WRONGPASS", "NOPERM")):
                raise store.StoreUnavailable(
                    f"the Redis session store at {self.where!r} refuses writes ({text}); "
                    "fix the server's persistence or the credentials in [persistence] url"
                ) from None
            raise store.StoreError(
                f"the Redis session store at {self.where!r} failed: {text}"
            ) from None
        except redis.RedisError as exc:
            raise store.StoreError(
                f"the Redis session store at {self.where!r} failed: {scrub(str(exc), self._url)}"
            ) from None

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
        with self._guard():
            return self._scripts[name](keys=list(keys), args=list(args))

    def _check_version(self) -> None:
        self._r.set(_P + "version", SCHEMA_VERSION, nx=True)
        found = int(self._r.get(_P + "version") or 0)
        if found > SCHEMA_VERSION:
            raise store.StoreError(
                f"the Redis session store at {self.where!r} has layout version {found}, newer "
                f"than this broker's {SCHEMA_VERSION}; upgrade the broker or use another "
                "database"
            )
        if found == 1:
            log.info("session store %s: migrating to layout version 2", self.where)
            for session_id in self.list_session_ids():
                self._count_v1(session_id)
            self._r.set(_P + "version", SCHEMA_VERSION)

    def _count_v1(self, session_id: str) -> None:
        """Give a session of layout 1 its message count and token sum, and each message's
        tokens in its id record (retried if a writer touches the session meanwhile)."""
        k = _Keys(session_id)

        def attempt(pipe: redis.client.Pipeline) -> None:
            rows = pipe.hgetall(k.msg)
            metas = pipe.hgetall(k.msgmeta)
            tokens = {seq: stored_tokens(row, "raw") for seq, row in rows.items()}
            pipe.multi()
            pipe.hset(k.h, mapping={"msg_total": len(rows), "msg_tokens": sum(tokens.values())})
            for seq, meta in metas.items():
                message_id, call_ids = json.loads(meta)[:2]
                pipe.hset(k.msgmeta, seq, dumps([message_id, call_ids, tokens.get(seq, 0)]))

        self._r.transaction(attempt, k.h, k.msg, k.msgmeta)

    def _check_durability(self) -> None:
        try:
            config: dict[Any, Any] = dict(self._r.config_get("append*"))
        except redis.ResponseError:
            log.warning(
                "session store %s: cannot read the server's appendonly/appendfsync settings; "
                "writes are only as durable as the server is configured",
                self.where,
            )
            return
        aof = config.get(b"appendonly", config.get("appendonly"))
        sync = config.get(b"appendfsync", config.get("appendfsync"))
        if aof not in (b"yes", "yes") or sync not in (b"always", "always"):
            log.warning(
                "session store %s: Redis runs with appendonly=%s appendfsync=%s; acknowledged "
                "writes can be lost if the server stops abruptly (set appendonly yes and "
                "appendfsync always)",
                self.where,
                _text(aof),
                _text(sync),
            )

    # -- header and items -------------------------------------------------------------------

    def create_session(self, header: store.SessionHeader, items: Sequence[SessionItem]) -> None:
        h = header
        k = _Keys(h.session_id)
        meta = {"agent": h.agent, "created_at": h.created_at, "preset": h.preset}
        if h.profile is not None:  # sessions stored before profiles have no key: None
            meta["profile"] = h.profile
        args: list[Any] = [h.session_id, dumps(meta), len(h.removed), *map(ref_key, h.removed)]
        for item in items:
            args += [ref_key(item.ref), dumps(item.to_dict())]
        keys = [k.h, k.items, k.item, _P + "sessions", _P + "session_ord", k.removed]
        if not self._run("create", keys, args):
            raise store.StoreError(f"session {h.session_id!r} already exists")

    def header(self, session_id: str) -> store.SessionHeader | None:
        k = _Keys(session_id)
        with self._guard():
            pipe = self._r.pipeline(transaction=True)
            pipe.hget(k.h, "meta")
            pipe.lrange(k.removed, 0, -1)
            meta, removed = pipe.execute()
        if meta is None:
            return None
        m = json.loads(meta)
        refs = tuple(map(_ref, removed))
        return store.SessionHeader(
            session_id, m["agent"], m["created_at"], m["preset"], refs, m.get("profile")
        )

    def list_session_ids(self) -> list[str]:
        with self._guard():
            return [_text(s) for s in self._r.zrange(_P + "sessions", 0, -1)]

    def session_ids_page(self, offset: int, limit: int) -> list[str]:
        if limit <= 0:
            return []
        with self._guard():
            page = self._r.zrevrange(_P + "sessions", offset, offset + limit - 1)
            return [_text(s) for s in page]

    def items(self, session_id: str) -> tuple[SessionItem, ...]:
        k = _Keys(session_id)
        with self._guard():
            pipe = self._r.pipeline(transaction=True)
            pipe.lrange(k.items, 0, -1)
            pipe.hgetall(k.item)
            order, by_key = pipe.execute()
        return tuple(SessionItem.from_dict(json.loads(by_key[key])) for key in order)

    def add_items(self, session_id: str, items: Sequence[SessionItem]) -> tuple[SessionItem, ...]:
        k = _Keys(session_id)
        by_key: dict[str, SessionItem] = {}
        for item in items:
            by_key.setdefault(ref_key(item.ref), item)
        args = [v for key, item in by_key.items() for v in (key, dumps(item.to_dict()))]
        added = self._run("add_items", [k.h, k.items, k.item, k.removed], args)
        if added is None:
            raise store.unknown_session(session_id)
        return tuple(by_key[_text(key)] for key in added)

    def remove_item(self, session_id: str, ref: ItemRef) -> bool:
        k = _Keys(session_id)
        was = self._run("remove_item", [k.h, k.items, k.item, k.removed], [ref_key(ref)])
        if was is None:
            raise store.unknown_session(session_id)
        return bool(was)

    # -- turns ------------------------------------------------------------------------------

    def append_turn(self, session_id: str, turn: RequestContext) -> int:
        k = _Keys(session_id)
        seq = self._run(
            "append", [k.h, k.turns, k.turnidx], [dumps(turn.to_dict()), turn.request_id]
        )
        if seq is None:
            raise store.unknown_session(session_id)
        return int(seq)

    def turn(self, session_id: str, request_id: str) -> RequestContext | None:
        k = _Keys(session_id)
        with self._guard():
            seq = self._r.hget(k.turnidx, request_id)
            data = None if seq is None else self._r.lindex(k.turns, int(seq))
        return self._turn(session_id, None if seq is None else int(seq), _raw(data))

    def _turn(self, session_id: str, seq: int | None, data: bytes | None) -> RequestContext | None:
        if seq is None or not data:  # none, or removed as damaged
            return None
        return decoded(self._damage, session_id, "turn", seq, data, turn_of)

    def extend_turn(
        self, session_id: str, request_id: str, items: Sequence[RequestItem]
    ) -> RequestContext | None:
        k = _Keys(session_id)

        def attempt(pipe: redis.client.Pipeline) -> RequestContext | None:
            seq = _raw(pipe.hget(k.turnidx, request_id))
            if seq is None:
                return None
            data = pipe.lindex(k.turns, int(seq))
            if data is None:
                return None
            turn = RequestContext.from_dict(json.loads(data)).with_items(tuple(items))
            pipe.multi()
            pipe.lset(k.turns, int(seq), dumps(turn.to_dict()))
            return turn

        with self._guard():
            found = self._r.transaction(
                attempt,  # type: ignore[arg-type]  # redis types the callable as returning None
                k.turns,
                k.turnidx,
                value_from_callable=True,
            )
        return found if isinstance(found, RequestContext) else None

    def turns(
        self, session_id: str, offset: int = 0, limit: int | None = None
    ) -> list[RequestContext]:
        if limit is not None and limit <= 0:
            return []
        start = max(offset, 0)
        end = -1 if limit is None else start + limit - 1
        with self._guard():
            rows = self._r.lrange(_Keys(session_id).turns, start, end)
        kept = [(start + i, r) for i, r in enumerate(rows) if r]  # '' was removed as damaged
        return [t for _, t in readable(self._damage, session_id, "turn", kept, turn_of)]

    def turn_count(self, session_id: str) -> int:
        with self._guard():
            return int(self._r.llen(_Keys(session_id).turns))

    def last_turn(self, session_id: str) -> RequestContext | None:
        with self._guard():
            pipe = self._r.pipeline(transaction=True)
            pipe.llen(_Keys(session_id).turns)
            pipe.lindex(_Keys(session_id).turns, -1)
            count, data = pipe.execute()
        return self._turn(session_id, count - 1 if count else None, data)

    # -- history messages -------------------------------------------------------------------

    def append_messages(
        self, session_id: str, messages: Sequence[store.MessageRecord]
    ) -> tuple[int, ...]:
        no_repeats([m.id for m in messages], "message id")
        no_repeats([c for m in messages for c in m.call_ids], "tool call id")
        k = _Keys(session_id)
        batch = dumps([[m.id, _message_json(m), list(m.call_ids), m.tokens] for m in messages])
        keys = [k.h, k.msg, k.msgseq, k.msgids, k.callids, k.msgmeta]
        found = self._run("append_messages", keys, [batch])
        if found is None:
            raise store.unknown_session(session_id)
        if isinstance(found, list):
            what, value = (_text(v) for v in found)
            raise store.DuplicateRecord(f"{what} {value!r} is already used")
        return tuple(range(int(found), int(found) + len(messages)))

    def messages(
        self, session_id: str, start: int = 0, end: int | None = None
    ) -> list[store.MessageRecord]:
        k = _Keys(session_id)
        stop = "+inf" if end is None else f"({end}"
        flat = self._run("read_messages", [k.msgseq, k.msg], [max(start, 0), stop])
        out = []
        for seq, row in zip(flat[::2], flat[1::2], strict=True):
            m = decoded(self._damage, session_id, "message", int(seq), row, _wrapped_message)
            if m is not None:
                out.append(store.MessageRecord(m["id"], m["raw"], tuple(m["call_ids"]), int(seq)))
        return out

    def message_totals(self, session_id: str) -> tuple[int, int]:
        with self._guard():
            total, tokens = self._r.hmget(_Keys(session_id).h, ["msg_total", "msg_tokens"])
        return (int(total or 0), int(tokens or 0))

    def message_count(self, session_id: str) -> int:
        with self._guard():
            found = self._r.hget(_Keys(session_id).h, "next_msg")
        return int(found) if found is not None else 0

    def used_ids(
        self, session_id: str, message_ids: Iterable[str], call_ids: Iterable[str]
    ) -> tuple[frozenset[str], frozenset[str]]:
        k = _Keys(session_id)
        return self._present(k.msgids, list(message_ids)), self._present(k.callids, list(call_ids))

    def _present(self, key: str, fields: list[str]) -> frozenset[str]:
        if not fields:
            return frozenset()
        with self._guard():
            found = self._r.hmget(key, fields)
        return frozenset(f for f, v in zip(fields, found, strict=True) if v is not None)

    def replace_messages(self, session_id: str, messages: Sequence[store.MessageRecord]) -> None:
        k = _Keys(session_id)
        batch = dumps(
            [[m.id, _message_json(m), list(m.call_ids), m.seq, m.tokens] for m in messages]
        )
        keys = [k.h, k.msg, k.msgseq, k.msgids, k.callids, k.msgmeta]
        found = self._run("replace_messages", keys, [batch])
        if found is None:
            raise store.unknown_session(session_id)
        if _text(found[0]) == "missing":
            raise store.StoreError(f"no stored message with seq {int(found[1])!r} to replace")

    def delete_messages(self, session_id: str, start: int, end: int | None = None) -> int:
        k = _Keys(session_id)
        stop = "+inf" if end is None else f"({end}"
        keys = [k.h, k.msg, k.msgseq, k.msgids, k.callids, k.msgmeta]
        count = self._run("delete_messages", keys, [start, stop])
        if count is None:
            raise store.unknown_session(session_id)
        return int(count)

    # -- small JSON parts (history_state, snapshot and their updates: JsonParts) -----------

    def _part(self, session_id: str, kind: store.PartKind) -> dict[str, Any] | None:
        with self._guard():
            data = self._r.hget(_Keys(session_id).parts, kind)
        return None if data is None else json.loads(data)

    def _update_part(
        self, session_id: str, kind: store.PartKind, change: store.JsonChange
    ) -> dict[str, Any] | None:
        k = _Keys(session_id)
        result: list[dict[str, Any] | None] = []

        def attempt(pipe: redis.client.Pipeline) -> None:
            # Runs again from the top if another client touches the watched keys before EXEC.
            result.clear()
            if not pipe.exists(k.h):
                raise store.unknown_session(session_id)
            data = pipe.hget(k.parts, kind)
            new = change(None if data is None else json.loads(data))
            pipe.multi()
            if new is None:
                pipe.hdel(k.parts, kind)
            else:
                pipe.hset(k.parts, kind, dumps(new))
            result.append(new)

        with self._guard():
            self._r.transaction(attempt, k.h, k.parts)
        return result[0]

    # -- recorded calls and usage events ----------------------------------------------------

    def append_call(self, session_id: str, call: Mapping[str, Any]) -> int:
        k = _Keys(session_id)
        seq = self._run("append", [k.h, k.calls], [dumps(dict(call))])
        if seq is None:
            raise store.unknown_session(session_id)
        return int(seq)

    def calls(self, session_id: str) -> list[dict[str, Any]]:
        with self._guard():
            rows = self._r.lrange(_Keys(session_id).calls, 0, -1)
        kept = [(i, r) for i, r in enumerate(rows) if r]  # '' was removed as damaged
        return [
            {**c, "seq": i} for i, c in readable(self._damage, session_id, "call", kept, call_of)
        ]

    def append_usage_event(self, session_id: str | None, event: Mapping[str, Any]) -> int:
        data = dumps({"session_id": session_id, "event": dict(event)})
        keys = [_P + "usage"]
        if session_id is not None:
            keys += [_Keys(session_id).h, _Keys(session_id).usage]
        seq = self._run("append_usage", keys, [data])
        if seq is None:
            raise store.unknown_session(session_id or "")
        return int(seq)

    def record_call(self, session_id: str, record: store.CallToRecord) -> store.RecordedCall:
        call, messages, usage, history = record.call, record.messages, record.usage, record.history
        no_repeats([m.id for m in messages], "message id")
        no_repeats([c for m in messages for c in m.call_ids], "tool call id")
        k = _Keys(session_id)
        keys = [k.h, k.calls, k.msg, k.msgseq, k.msgids, k.callids, k.msgmeta, k.parts]
        keys += [_P + "usage", k.usage]
        args = [
            "" if call is None else dumps(dict(call)),
            dumps([[m.id, _message_json(m), list(m.call_ids), m.tokens] for m in messages]),
            "" if usage is None else dumps({"session_id": session_id, "event": dict(usage)}),
        ]
        while True:  # one script; again only if the history state changed meanwhile
            found = self._run("record_call", keys, args + self._state_change(k, history))
            if found is None:
                raise store.unknown_session(session_id)
            if _text(found[0]) != "conflict":
                break
        if _text(found[0]) != "ok":
            raise store.DuplicateRecord(f"{_text(found[0])} {_text(found[1])!r} is already used")
        call_seq, first, usage_seq = (int(v) for v in found[1:])
        return store.RecordedCall(
            None if call is None else call_seq,
            tuple(range(first, first + len(messages))) if messages else (),
            None if usage is None else usage_seq,
        )

    def _state_change(self, k: _Keys, change: store.JsonChange | None) -> list[Any]:
        """The record script's arguments for ``change`` of the history state: how, the
        value it was computed from (the script compares it) and the new value."""
        if change is None:
            return ["", "", ""]
        with self._guard():
            old = self._r.hget(k.parts, "history")
        new = change(None if old is None else json.loads(old))
        return ["del" if new is None else "set", old or "", "" if new is None else dumps(new)]

    def usage_events(self, session_id: str | None = None) -> list[dict[str, Any]]:
        if session_id is None:
            with self._guard():
                rows = list(enumerate(self._r.lrange(_P + "usage", 0, -1)))
        else:
            flat = self._run("read_usage", [_Keys(session_id).usage, _P + "usage"])
            rows = [(int(seq), row) for seq, row in zip(flat[::2], flat[1::2], strict=True)]
        out = []
        for seq, row in rows:
            if not row:  # deleted
                continue
            e = json.loads(row)
            out.append({**e["event"], "seq": seq, "session_id": e["session_id"]})
        return out

    def delete_usage_events(self, session_id: str | None = None) -> int:
        if session_id is not None:
            keys = [_P + "usage", _Keys(session_id).usage]
            return int(self._run("delete_usage", keys, ["session"]))
        keys = [_P + "usage", *(_Keys(sid).usage for sid in self.list_session_ids())]
        return int(self._run("delete_usage", keys, ["all"]))

    # -- shared embedding cache -------------------------------------------------------------

    def get_embeddings(self, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = list(hashes)
        if not wanted:
            return {}
        with self._guard():
            found: list[Any] = list(self._r.hmget(f"{_P}emb:{model}", wanted))
        return {h: bytes(v) for h, v in zip(wanted, found, strict=True) if v is not None}

    def put_embeddings(self, model: str, vectors: Mapping[str, bytes]) -> None:
        if not vectors:
            return
        args = [v for h, vec in vectors.items() for v in (h, bytes(vec))]
        self._run("put_embeddings", [f"{_P}emb:{model}"], args)

    def check_writable(self) -> None:
        """``StoreUnavailable`` if the server cannot be reached or refuses a write."""
        with self._guard():
            self._r.set(_P + "probe", "1")

    # -- damaged records --------------------------------------------------------------------

    def skipped_records(self, session_id: str) -> tuple[store.DamagedRecord, ...]:
        return self._damage.of(session_id)

    def damaged_records(self, session_id: str | None = None) -> list[store.DamagedRecord]:
        found: list[store.DamagedRecord] = []
        for sid in [session_id] if session_id else self.list_session_ids():
            k = _Keys(sid)
            with self._guard():
                pipe = self._r.pipeline(transaction=True)
                pipe.lrange(k.turns, 0, -1)
                pipe.hgetall(k.msg)
                pipe.lrange(k.calls, 0, -1)
                turns, messages, calls = pipe.execute()
            found += damaged_in("turn", ((sid, i, r) for i, r in enumerate(turns) if r))
            rows = sorted((int(seq), row) for seq, row in messages.items())
            found += [
                store.DamagedRecord(sid, "message", seq, exc.reason)
                for seq, row in rows
                if (exc := _unreadable(row)) is not None
            ]
            found += damaged_in("call", ((sid, i, r) for i, r in enumerate(calls) if r))
        return found

    def remove_damaged(self, records: Sequence[store.DamagedRecord]) -> int:
        removed = 0
        for r in records:
            k = _Keys(r.session_id)
            if r.kind == "message":
                removed += self.delete_messages(r.session_id, r.seq, r.seq + 1)
                continue
            # List entries keep their place (a turn's or call's seq is its index): emptied.
            key = k.turns if r.kind == "turn" else k.calls
            with self._guard():
                if self._r.lindex(key, r.seq):
                    self._r.lset(key, r.seq, "")
                    removed += 1
        self._damage.forget(records)
        return removed

    def close(self) -> None:
        """Close the client's connections."""
        self._r.close()


def _wrapped_message(text: bytes | str) -> dict[str, Any]:
    """A stored message with its id and tool call ids (``Unreadable`` if it is damaged)."""
    m = call_of(text)
    if not isinstance(m.get("id"), str) or not isinstance(m.get("call_ids"), list):
        raise Unreadable("not a stored message (no id or call ids)")
    message_value(m.get("raw"))
    return m


def _unreadable(text: bytes | str) -> Unreadable | None:
    try:
        _wrapped_message(text)
    except Unreadable as exc:
        return exc
    return None


def _message_json(m: store.MessageRecord) -> str:
    return dumps({"id": m.id, "raw": dict(m.raw), "call_ids": list(m.call_ids)})


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _raw(value: object) -> bytes | None:
    """A reply of this store's client (raw bytes: it never decodes responses) as bytes."""
    return value if isinstance(value, bytes) else None
