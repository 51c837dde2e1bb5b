"""Size checks on what a history operation is about to store (``[limits]`` in the config).

Each check runs before anything is stored and raises ``HistoryError`` naming the field, its
size, the limit's config key and value, and what to do instead.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..config import LimitsConfig
from ..errors import HistoryError
from .messages import Message
from .snapshot import TaskSnapshot

__all__ = ["check_append", "check_label", "check_snapshot", "check_text", "too_long"]


def too_long(what: str, size: int, key: str, limit: int, advice: str) -> str:
    """``what of 1,200,000 characters exceeds limits.KEY (100000); advice``."""
    return f"{what} of {size:,} characters exceeds limits.{key} ({limit}); {advice}"


def check_text(value: str | None, limit: int, key: str, field: str, advice: str) -> None:
    """Refuse ``value`` when it is longer than ``limit`` characters."""
    if value is not None and len(value) > limit:
        raise HistoryError(too_long(field, len(value), key, limit, advice), field=field)


def check_label(value: str | None, limits: LimitsConfig, field: str) -> None:
    """Refuse a name or short description longer than ``limits.max_label_chars``."""
    check_text(value, limits.max_label_chars, "max_label_chars", field, "use a shorter text")


def check_append(messages: Sequence[Message], start: int, limits: LimitsConfig) -> None:
    """Refuse messages (parsed, about to be appended at ``start``) that are too big, one by
    one (``max_history_message_chars``) or together (``max_append_chars``); sizes are of the
    message's compact JSON, tool calls and results included."""
    total = 0
    for offset, message in enumerate(messages):
        size = len(message.json_text)
        total += size
        if size > limits.max_history_message_chars:
            where = f"messages[{start + offset}]"
            advice = "store a shorter text or a reference to the content (a path, a URL)"
            message_text = too_long(
                where, size, "max_history_message_chars", limits.max_history_message_chars, advice
            )
            raise HistoryError(message_text, field=where)
    if total > limits.max_append_chars:
        advice = "send the messages in several smaller calls"
        raise HistoryError(
            too_long("messages", total, "max_append_chars", limits.max_append_chars, advice),
            field="messages",
        )


_SNAPSHOT_FIELDS = (
    ("goal", "goal"),
    ("currentPhase", "current_phase"),
    ("completedActions", "completed_actions"),
    ("keyObservations", "key_observations"),
)


def check_snapshot(snapshot: TaskSnapshot, touched: Collection[str], limits: LimitsConfig) -> None:
    """Refuse a merged snapshot one of whose ``touched`` fields (camelCase keys of the
    update; a list counts all its entries together) is longer than
    ``limits.max_snapshot_field_chars``. Untouched fields are left alone, so lowering the
    limit never blocks updates of the other fields."""
    limit = limits.max_snapshot_field_chars
    for key, attribute in _SNAPSHOT_FIELDS:
        if key not in touched:
            continue
        field = attribute
        value = getattr(snapshot, attribute)
        size = sum(len(v) for v in value) if isinstance(value, tuple) else len(value or "")
        if size > limit:
            advice = (
                "send shorter entries; lists keep every entry, so summarize older ones "
                "into a key observation instead of adding more"
                if isinstance(value, tuple)
                else "send a shorter text"
            )
            raise HistoryError(
                too_long(field, size, "max_snapshot_field_chars", limit, advice), field=field
            )
