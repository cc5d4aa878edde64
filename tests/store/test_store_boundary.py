"""The store owns its SQL: no module outside dashbench/store/ reaches into its internals or writes
SQL, and the store's own modules import each other without a cycle."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "dashbench" / "store"
# The Store's private handles and the helpers that write on a connection it holds.
PRIVATE = {
    "_read",
    "_write",
    "_update",
    "_move",
    "_insert",
    "_insert_run",
    "_reconcile",
    "_conn",
    "insert_run",
    "reconcile_locked",
}
SQL = re.compile(r"\b(SELECT|UPDATE|INSERT|DELETE)\b.*\b(FROM|SET|INTO)\b", re.S)


def offences(source: str) -> list[str]:
    """What in `source` reaches into the store: its private names, or SQL in a string."""
    found = []
    for node in ast.walk(ast.parse(source)):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.alias):
            name = node.asname or node.name
        if name in PRIVATE:
            found.append(f"line {node.lineno}: {name}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
            found.append(f"line {node.lineno}: SQL {node.value[:60]!r}")
    return found


def outside_the_store() -> list[Path]:
    files = [*(ROOT / "dashbench").rglob("*.py"), ROOT / "app.py", *(ROOT / "pages").rglob("*.py")]
    return sorted(p for p in files if p.exists() and STORE not in p.parents)


def test_the_check_catches_what_it_looks_for():
    assert offences("from dashbench.store.database import _update, reconcile_locked") == [
        "line 1: _update",
        "line 1: reconcile_locked",
    ]
    assert offences("with store._write('x') as conn:\n    conn.execute('UPDATE runs SET a = 1')") == [
        "line 1: _write",
        "line 2: SQL 'UPDATE runs SET a = 1'",
    ]
    assert offences("rows = store._read(f'SELECT count(*) FROM runs WHERE x = {y}')") != []
    assert offences("help = 'Select the runs to delete from the table'") == []  # words, not SQL


def test_no_module_outside_the_store_touches_its_internals_or_writes_sql():
    found = {str(p.relative_to(ROOT)): offences(p.read_text()) for p in outside_the_store()}
    assert len(found) > 20  # the walk found the package
    assert {path: what for path, what in found.items() if what} == {}


def test_the_bench_uses_only_the_stores_public_api():
    # Its query plans read the file through sqlite3 on purpose; the Store's internals are another matter.
    source = (ROOT / "bench" / "store_queries.py").read_text()
    assert [o for o in offences(source) if "SQL" not in o] == []


def _store_imports(path: Path) -> set[str]:
    """The dashbench.store modules that `path` imports, at any depth of the file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return out & set(_store_modules())


def _store_modules() -> dict[str, Path]:
    """The store's modules by name, its per-database folders' too (dashbench.store.postgres.server)."""
    return {
        "dashbench.store." + ".".join(p.relative_to(STORE).with_suffix("").parts): p
        for p in STORE.rglob("*.py")
        if p.stem != "__init__" and "migrations" not in p.parts
    }


def test_the_store_modules_import_no_cycle():
    graph = {name: _store_imports(path) for name, path in _store_modules().items()}
    assert "dashbench.store.database" in graph["dashbench.store.bundle"]  # the walk sees imports
    assert "dashbench.store.postgres.connection" in graph["dashbench.store.postgres.backend"]  # and folders

    def visit(module, path):
        if module in path:
            pytest.fail("import cycle: " + " -> ".join([*path[path.index(module) :], module]))
        for target in graph.get(module, ()):
            visit(target, [*path, module])

    for module in graph:
        visit(module, [])


def test_the_database_loads_without_bundles():
    code = "import sys, dashbench.store.database, dashbench.store; print('dashbench.store.bundle' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
