"""docs/team-store.md's SQL, run as written (psql, \\connect included) on the tests' own server:
the writer owns the store, the reader can SELECT what the writer creates and write nothing."""

import re
import subprocess
from pathlib import Path

import psycopg
import pytest
from fixtures.pg_server import bindir, skip_unless_the_store_takes_urls

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "team-store.md").read_text()


def page_sql() -> str:
    return re.search(r"```sql\n(.*?)```", PAGE, re.S).group(1)


def test_the_page_names_both_roles_and_every_grant():
    sql = page_sql()
    for words in (
        "CREATE ROLE writer LOGIN PASSWORD",
        "CREATE ROLE reader LOGIN PASSWORD",
        "GRANT CONNECT",
        "GRANT USAGE ON SCHEMA public",
        "GRANT SELECT ON ALL TABLES IN SCHEMA public",
        "ALTER DEFAULT PRIVILEGES",
    ):
        assert words in sql, words
    assert "DASHBENCH_DB=postgresql+psycopg://writer@" in PAGE and "ssh -N -f -L 5432:localhost:5432" in PAGE
    assert "DASHBENCH_DB=postgresql+psycopg://reader@" in PAGE and "~/.pgpass" in PAGE


@pytest.fixture
def page_roles(pg_server, tmp_path):
    """The page's block run by psql as the server's superuser; the database and roles dropped after."""
    script = tmp_path / "team.sql"
    script.write_text(page_sql())
    try:
        done = subprocess.run(
            [
                bindir() / "psql",
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                "127.0.0.1",
                "-p",
                str(pg_server.port),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-f",
                script,
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        yield pg_server
    finally:
        with pg_server.connect() as conn:
            conn.execute("DROP DATABASE IF EXISTS dashbench WITH (FORCE)")
            conn.execute("DROP ROLE IF EXISTS reader")
            conn.execute("DROP ROLE IF EXISTS writer")


def test_the_readers_role_selects_what_the_writer_stores_and_writes_nothing(page_roles):
    server = page_roles
    with server.connect("dashbench", user="writer") as writer:  # the owner: it creates the store's tables
        writer.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, label TEXT)")
        writer.execute("INSERT INTO runs VALUES ('r1', 'base')")
    with server.connect("dashbench", user="reader") as reader:
        assert reader.execute("SELECT run_id, label FROM runs").fetchall() == [("r1", "base")]
        for statement in (
            "INSERT INTO runs VALUES ('r2', 'x')",
            "UPDATE runs SET label = 'x'",
            "DELETE FROM runs",
            "TRUNCATE runs",
            "DROP TABLE runs",
            "CREATE TABLE mine (x integer)",
            "CREATE TEMP TABLE mine (x integer)",
            "ALTER TABLE runs ADD COLUMN x integer",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute(statement)
    with server.connect("dashbench", user="writer") as writer:
        assert writer.execute("SELECT count(*), min(label) FROM runs").fetchone() == (1, "base")


def test_only_the_two_roles_reach_the_database(page_roles):
    server = page_roles
    with server.connect() as conn:
        conn.execute("CREATE ROLE stranger LOGIN")
    try:
        with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
            server.connect("dashbench", user="stranger")
    finally:
        with server.connect() as conn:
            conn.execute("DROP ROLE stranger")


def test_a_store_opened_as_the_reader_lists_the_writers_runs_and_cannot_write(page_roles):
    from fixtures.stored_runs import SPEC

    from dashbench.store import Store, StoreError

    server = page_roles
    skip_unless_the_store_takes_urls(server.url("dashbench", user="writer"))
    with Store(server.url("dashbench", user="writer")) as writer:
        run_id = writer.create_run(SPEC)
        writer.finish_run(run_id, "failed", error="stopped by the test")
    with Store(server.url("dashbench", user="reader"), read_only=True) as reader:
        assert reader.run_ids() == [run_id]
    # Even opened for writing, the reader's role writes nothing: the server refuses it.
    with pytest.raises(StoreError, match="read-only|permission denied"):
        with Store(server.url("dashbench", user="reader")) as reader:
            reader.create_run(SPEC)
    with Store(server.url("dashbench", user="writer")) as writer:
        assert writer.run_ids() == [run_id]
