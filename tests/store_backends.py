"""The store tests' database, parametrised: an SQLite file, and a fresh database on the tests' own
PostgreSQL server (pg_server.py). A test that takes `db_at` runs against both."""

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def db_at(request, tmp_path):
    """Where a test's store lives: an SQLite file under tmp_path, or a postgresql+psycopg:// URL."""
    if request.param == "sqlite":
        return tmp_path / "r.sqlite"
    return request.getfixturevalue("pg_url")


def on_server(db_at) -> bool:
    return isinstance(db_at, str) and "://" in db_at
