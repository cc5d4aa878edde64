"""Text for a terminal: what the store holds or a user typed is printed with its control characters
escaped, so a stored host of "evil\\nhost\\x1b[31m" cannot forge a line, colour the screen, move the
cursor or retitle the window. --json output needs none of this: json.dumps escapes them already."""

from __future__ import annotations

import re
from typing import Any

# C0 (newline and tab included: inside one field they forge lines and columns), DEL, C1 (a one-byte
# CSI among them), the bidirectional overrides and isolates that reorder what is shown, and the
# Unicode line and paragraph separators. ESC is C0: escaping it leaves an ANSI sequence inert text.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def shown(value: Any) -> str:
    """One value as one safe line: every control character escaped (\\n, \\t, \\x1b, \\x9b, \\u202e)."""
    return CONTROL.sub(_escape, str(value))


def shown_lines(text: str) -> str:
    """Text whose line breaks are meant (a table, a report): each line made safe, the breaks kept."""
    return "\n".join(shown(line) for line in str(text).split("\n"))


def shown_tree(value: Any) -> Any:
    """Every string inside dicts and lists made safe (a stored record about to be described)."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {shown_tree(k) if isinstance(k, str) else k: shown_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(shown_tree(v) for v in value)
    return value
