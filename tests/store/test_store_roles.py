"""The store's protocols stay small: each role of a session store is its own protocol of at
most twelve methods, inherited ones counted, and every backend gives an object for each."""

from __future__ import annotations

import inspect
import sys
import typing
from types import ModuleType

import contextcore.store
import contextcore.store_records
import contextcore.store_roles
from contextcore.memory_store import MemorySessionStore
from contextcore.store import SessionStore

MOST_METHODS = 12
STORE_MODULES = (contextcore.store, contextcore.store_roles, contextcore.store_records)


def _protocols(module: ModuleType) -> list[type]:
    return [
        value
        for value in vars(module).values()
        if inspect.isclass(value) and getattr(value, "_is_protocol", False)
    ]


def _methods(protocol: type) -> set[str]:
    """Every method the protocol asks for, its bases' included."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (object, typing.Protocol, typing.Generic):
            continue
        names |= {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    return names


def test_no_store_protocol_has_more_than_twelve_methods_counting_inherited_ones() -> None:
    protocols = [p for m in STORE_MODULES for p in _protocols(m)]
    assert len(protocols) >= 8, protocols
    sizes = {p.__qualname__: len(_methods(p)) for p in protocols}
    assert max(sizes.values()) <= MOST_METHODS, sizes


class _AllRoles(
    contextcore.store_roles.SessionRecords,
    contextcore.store_roles.SessionParts,
    contextcore.store_roles.TurnLog,
    contextcore.store_roles.MessageLog,
    contextcore.store_roles.CallLog,
    contextcore.store_roles.EmbeddingRecords,
    contextcore.store_roles.DamageRecords,
    contextcore.store_roles.StoreHealth,
    typing.Protocol,
):
    """A protocol that inherits every role: what the count must catch."""


def test_the_count_takes_in_what_a_protocol_inherits() -> None:
    assert _AllRoles in _protocols(sys.modules[__name__])
    assert len(_methods(_AllRoles)) == 39 > MOST_METHODS


def test_the_whole_store_is_no_protocol_but_holds_an_object_for_each_role() -> None:
    assert not getattr(SessionStore, "_is_protocol", False)
    store = MemorySessionStore()
    try:
        held = {name: getattr(store, attr) for name, attr in _ROLE_OF.items()}
        for name, role in held.items():
            assert isinstance(role, getattr(contextcore.store_roles, name)), name
    finally:
        store.close()


_ROLE_OF = {
    "SessionRecords": "session_records",
    "SessionParts": "parts",
    "TurnLog": "turn_log",
    "MessageLog": "message_log",
    "CallLog": "call_log",
    "EmbeddingRecords": "embeddings",
    "DamageRecords": "damage",
    "StoreHealth": "health",
}
