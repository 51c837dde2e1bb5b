"""Text from outside made safe to print on a terminal.

Tool names, parameter names, descriptions, a downstream's stderr and server names from a
host's file reach ``check``, ``tools status`` and the log. Printed raw, an ESC sequence could
write the clipboard (OSC 52), retitle the window or hide text, and a bidi control could make
a line read differently from what it holds. :func:`escape` shows each such character as a
visible escape (``\\x1b``, ``\\u202e``) instead; :class:`EscapingFormatter` does the same for
every log message.
"""

from __future__ import annotations

import logging
import re

__all__ = ["EscapingFormatter", "escape", "escape_lines"]

# C0 controls and DEL, C1 controls, and the invisible format characters that reorder or hide
# text: bidi embeddings, overrides, isolates and marks, zero-width characters, line and
# paragraph separators, the byte order mark, the interlinear annotation characters, and the
# tag characters (invisible ASCII look-alikes).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
    "\ufff9-\ufffb\U000e0000-\U000e007f]"
)


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape(text: str) -> str:
    """``text`` with every control, bidi or invisible format character shown as an escape;
    printable text (any script, emoji) is left alone. A newline is escaped too: one value
    stays on one line."""
    return _UNSAFE.sub(_visible, text)


def escape_lines(text: str) -> str:
    """Several lines of text, each escaped on its own (the newlines between them kept)."""
    return "\n".join(escape(line) for line in text.split("\n"))


class EscapingFormatter(logging.Formatter):
    """A log formatter that escapes the message (tracebacks keep their lines), so a log
    line quoting a downstream cannot drive the terminal or forge another line."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape(record.message)
        return super().formatMessage(record)
