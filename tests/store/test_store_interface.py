"""One interface per database: the Store's shared modules never ask which database they are on; each
database's folder (store/sqlite/, store/postgres/) implements backend.Backend, and registry.py picks one
by the location's URL scheme."""

import ast
import inspect
from pathlib import Path

import pytest

from dashbench.store import Store, StoreError, backend, registry
from dashbench.store.postgres.backend import PostgresBackend
from dashbench.store.sqlite.backend import SQLiteBackend

STORE = Path(__file__).resolve().parents[2] / "dashbench" / "store"
PER_DATABASE = ("sqlite", "postgres")
# What a shared module would branch on to do one database's thing: whether it is on a server, or
# whether the server's engine or URL is there.
WHICH_DATABASE = {"is_server", "_engine", "_url"}


def branches_on_the_database(source: str) -> list[str]:
    """Lines of `source` whose test (if, while, a conditional expression, a comparison, and/or/not,
    an assert, a comprehension's if) reads `is_server` or `_engine`."""
    found = []
    tests = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            tests.append(node.test)
        elif isinstance(node, (ast.Compare, ast.BoolOp)) or (
            isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
        ):
            tests.append(node)
        elif isinstance(node, ast.comprehension):
            tests += node.ifs
    for test in tests:
        for part in ast.walk(test):
            name = part.attr if isinstance(part, ast.Attribute) else part.id if isinstance(part, ast.Name) else None
            if name in WHICH_DATABASE:
                found.append(f"line {part.lineno}: {name}")
    return sorted(set(found))


def shared_modules() -> list[Path]:
    return sorted(p for p in STORE.rglob("*.py") if p.relative_to(STORE).parts[0] not in PER_DATABASE)


def test_the_check_catches_a_branch_on_the_database():
    assert branches_on_the_database("if self._engine is None:\n    pass") == ["line 1: _engine"]
    assert branches_on_the_database("word = 'team' if store.is_server else 'file'") == ["line 1: is_server"]
    assert branches_on_the_database("if not self.is_server or inside:\n    pass") == ["line 1: is_server"]
    assert branches_on_the_database("while self._engine is not None and x:\n    pass") == ["line 1: _engine"]
    assert branches_on_the_database("server = self._db.is_server\nengine = make_engine()") == []


def test_no_shared_store_module_branches_on_which_database_it_is_on():
    files = shared_modules()
    assert STORE / "database.py" in files and STORE / "queue.py" in files  # the walk found them
    assert not any("postgres" in p.parts or "sqlite" in p.parts for p in files)
    found = {str(p.relative_to(STORE)): branches_on_the_database(p.read_text()) for p in files}
    assert {path: lines for path, lines in found.items() if lines} == {}
    assert not [p for p in files if "_engine is None" in p.read_text()]


def _left_to_each(owner, name: str) -> bool:
    """Whether `owner`'s own `name` only raises NotImplementedError (a method or property left to each database)."""
    member = vars(owner)[name]
    function = getattr(member, "fget", None) or getattr(member, "__func__", None) or member
    return callable(function) and "raise NotImplementedError" in inspect.getsource(function)


@pytest.mark.parametrize("cls", [SQLiteBackend, PostgresBackend])
def test_each_database_implements_the_whole_interface(cls):
    required = [
        name for name in vars(backend.Backend) if not name.startswith("__") and _left_to_each(backend.Backend, name)
    ]
    assert {"open", "close", "read", "write", "connection", "change_token", "upgrade", "exists"} <= set(required)
    owners = {name: next(k for k in cls.__mro__ if name in vars(k)) for name in required}
    assert [name for name, owner in owners.items() if owner is backend.Backend or _left_to_each(owner, name)] == []
    assert cls.dialect.name in ("sqlite", "postgresql")


def test_the_registry_picks_the_database_by_the_locations_scheme(tmp_path):
    for url in ("postgresql+psycopg://u@h:5432/d", "postgresql://u:pw@h/d", "POSTGRES://h/d"):
        assert registry.backend_for(registry.location(url)) is PostgresBackend
    assert registry.backend_for(registry.location(tmp_path / "a.sqlite")) is SQLiteBackend
    assert registry.backend_for(registry.location("relative/name.sqlite")) is SQLiteBackend
    with pytest.raises(StoreError, match=r"^db: a database URL mysql://… is not accepted; give postgresql"):
        Store("mysql://u@h/d")
    assert not (Path.cwd() / "mysql:").exists()  # refused before anything was made
    with Store(tmp_path / "a.sqlite") as store:
        assert isinstance(store._db, SQLiteBackend) and not store.is_server
        assert store.dialect is SQLiteBackend.dialect
