"""The dashboard's pages are built from sections: one function per panel, none long enough to hide a second
panel inside it, so that a new panel is a new function and a call, not an edit in the middle of a page."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VIEWS = ROOT / "dashbench" / "views"
MAX_FUNCTION_LINES = 80  # past this a function draws more than one panel: give each its own


def long_functions(folder: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """`path:line name (n lines)` of every function (nested ones too) longer than limit, decorators excluded."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(folder)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_of_the_views_is_longer_than_a_panel():
    assert long_functions(VIEWS) == []


def test_the_length_check_finds_a_long_function_wherever_it_hides(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "short.py").write_text("def short():\n    return 1\n")
    (tmp_path / "long.py").write_text(
        f"class Page:\n    def show(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n"
    )
    (tmp_path / "nested.py").write_text(
        f"def outer():\n    def inner():\n    {body.replace(chr(10), chr(10) + '    ')}\n"
    )
    found = long_functions(tmp_path)
    assert [f.split(":")[0].rsplit("/", 1)[-1] for f in found] == ["long.py", "nested.py", "nested.py"]
    assert "show (" in found[0] and "inner (" in found[2]
