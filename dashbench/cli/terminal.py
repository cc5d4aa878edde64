"""Text for a terminal: what the store holds or a user typed is printed with its control characters
escaped, so a stored host of "evil\\nhost\\x1b[31m" cannot forge a line, colour the screen, move the
cursor or retitle the window. --json output needs none of this: json.dumps escapes them already."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
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


# A line that is a command (after an optional "quick try: "), not prose naming one, wraps as one the shell
# still reads whole.
COMMAND = re.compile(r"^ *([\w ]+: )?python -m dashbench ")


def terminal_width(stream=None) -> int | None:
    """The width to fit text to: a terminal's ($COLUMNS first, as shutil reads it); None when the stream
    (stdout unless named) is a pipe or a file, which get every line whole for grep, awk and cut to read."""
    try:
        if not (stream or sys.stdout).isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return max(shutil.get_terminal_size().columns, 40)


def fit(text: str, width: int | None) -> str:
    """Each line longer than `width` wrapped under its own indent (plus four), a command's with a shell
    continuation (` \\`) so that a copy still runs; `width` None (a pipe, a file): the text unchanged."""
    if width is None:
        return text
    return "\n".join(piece for line in text.split("\n") for piece in _fit_line(line, width))


def _fit_line(line: str, width: int) -> list[str]:
    if len(line) <= width:
        return [line]
    lead = " " * (len(line) - len(line.lstrip(" ")))
    hang = lead + " " * 4 if len(lead) + 4 < width // 2 else " " * 4
    if COMMAND.match(line):
        # An option and its value stay on one line: held together by a no-break space while wrapping.
        held = re.sub(r"(--[\w-]+) (?!-)", "\\1\u00a0", line.lstrip(" "))
        pieces = textwrap.wrap(
            held,
            width - 2,
            initial_indent=lead,
            subsequent_indent=hang,
            break_long_words=False,
            break_on_hyphens=False,
        )
        pieces = [piece.replace("\u00a0", " ") for piece in pieces]
        return [piece + " \\" for piece in pieces[:-1]] + pieces[-1:]
    return textwrap.wrap(
        line.lstrip(" "), width, initial_indent=lead, subsequent_indent=hang, break_on_hyphens=False
    ) or [line]
