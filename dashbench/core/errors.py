"""An error in one line, for the one-line messages every command and page gives: the exception's text
with its whitespace (newlines, a traceback's indents) folded to single spaces, cut past a limit."""

from __future__ import annotations


def one_line(error: BaseException | str, limit: int | None = 500, *, typed: bool = False) -> str:
    """`error`'s text on one line; its type's name where it says nothing ("(no message)" for an empty
    string), and before its text as well when `typed`; cut to `limit` characters and "…" when longer."""
    text = " ".join(str(error).split())
    if isinstance(error, BaseException):
        name = type(error).__name__
        text = (f"{name}: {text}" if typed else text) if text else name
    else:
        text = text or "(no message)"
    return text if limit is None or len(text) <= limit else text[:limit] + "…"
