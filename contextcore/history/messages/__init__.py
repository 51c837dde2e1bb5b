"""The two chat message formats, read and written in one place.

Messages are plain JSON dicts at the edge, either OpenAI-style (``role`` system / user /
assistant / tool, assistant ``tool_calls``, tool messages with ``tool_call_id``) or
Anthropic-style (``content`` lists of ``text``, ``tool_use``, ``tool_result`` and ``image``
blocks). This package is the only code that knows those shapes:

- reading (``_read``): :class:`Message`, :class:`ToolCall`, :class:`ToolResult`, texts and
  parts in wire order, the conversation's :data:`Shape`;
- checking (``_check``): :func:`parse_messages` validates wire dicts once, when they enter,
  and assigns missing ids;
- editing (``_edit``): copy-on-write changes of texts, results and call arguments;
- writing (``_write``): new tool calls, results and blocks in either shape.

Everything else in the history package works on :class:`Message`.
"""

from __future__ import annotations

from ._check import check_ids, parse_messages
from ._edit import TRUNCATED, cut, map_args, map_texts, replace_result
from ._read import (
    ROLES,
    Message,
    Part,
    Role,
    Shape,
    ToolCall,
    ToolResult,
    block_is_empty,
    content_blocks,
    content_parts,
    detect_shape,
    has_image,
    make_message,
    message_text,
    read_tool_result,
    text_parts,
)
from ._write import result_block, text_block, tool_call_messages, tool_message

__all__ = [
    "ROLES",
    "TRUNCATED",
    "Message",
    "Part",
    "Role",
    "Shape",
    "ToolCall",
    "ToolResult",
    "block_is_empty",
    "check_ids",
    "content_blocks",
    "content_parts",
    "cut",
    "detect_shape",
    "has_image",
    "make_message",
    "map_args",
    "map_texts",
    "message_text",
    "parse_messages",
    "read_tool_result",
    "replace_result",
    "result_block",
    "text_block",
    "text_parts",
    "tool_call_messages",
    "tool_message",
]
