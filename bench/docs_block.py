"""The bench scripts' one way to write their figures into a docs page: the text between
`<!-- marker -->` and `<!-- /marker -->` is replaced (or the block is appended), the rest is kept."""

from __future__ import annotations

from pathlib import Path


def write_block(path: Path, marker: str, text: str, title: str = "# Performance") -> None:
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    current = path.read_text() if path.exists() else title + "\n"
    block = f"{start}\n{text.rstrip()}\n{end}"
    if start in current and end in current:
        current = current[: current.index(start)] + block + current[current.index(end) + len(end) :]
    else:
        current = current.rstrip("\n") + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(current)
