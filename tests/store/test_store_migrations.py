"""The store's schema steps as alembic revisions (dashbench/store/migrate.py, store/migrations/): every
revision makes the layout the hand-written step of its number made, a store of any earlier version
upgrades in place with nothing lost, a new store on either database has the layout of before alembic
(fixtures/store_schema_v9.json, dumped from commit 452c85a), two processes never both migrate, and the
next schema change is one file."""

import contextlib
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures.old_stores import HEAD, V9, old_file
from fixtures.schema_dump import postgres_layout, sqlite_layout
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC, result_for

from dashbench.cli import main
from dashbench.store import SchemaVersionError, Store, migrate, migrations, schema
from dashbench.store.postgres import server as postgres

ROOT = Path(__file__).resolve().parents[2]
BEFORE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "store_schema_v9.json").read_text())


def bookkeeping(db) -> tuple:
    """(alembic's revision, the version every dashbench reads) of a store, read past the Store's checks."""
    if on_server(db):
        import psycopg

        with psycopg.connect(db.replace("postgresql+psycopg://", "postgresql://")) as conn:
            return (
                conn.execute("SELECT version_num FROM alembic_version").fetchone()[0],
                conn.execute("SELECT version FROM dashbench_schema").fetchone()[0],
            )
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        return rows[0][0] if rows else None, conn.execute("PRAGMA user_version").fetchone()[0]


def layout(db) -> dict:
    return postgres_layout(db) if on_server(db) else sqlite_layout(db)


def test_each_revision_makes_the_layout_its_hand_written_step_made(tmp_path):
    assert schema.SCHEMA_VERSION == HEAD and migrations.numbers() == list(range(1, HEAD + 1))
    for number in range(1, V9 + 1):
        path = tmp_path / f"v{number}.sqlite"
        assert migrate.upgrade_sqlite(path, to=number) == (0, number)
        made = BEFORE["sqlite"] if number == V9 else BEFORE["sqlite_history"][str(number)]
        assert sqlite_layout(path) == made, f"v{number}"
        assert bookkeeping(path) == (migrations.revision_id(number), number)


def test_a_new_store_has_the_layout_of_before_alembic_at_the_head(db_at):
    with Store(db_at) as store:
        assert store.schema_upgrade == (0, HEAD) and store.schema_version == HEAD
    if HEAD == V9:  # past v9 the layout changed on purpose; v9's is checked on the way (tests above, below)
        assert layout(db_at) == BEFORE["postgresql" if on_server(db_at) else "sqlite"]
    assert bookkeeping(db_at) == (migrations.revision_id(HEAD), HEAD)
    with Store(db_at) as again:  # at the head: nothing runs, nothing is written
        assert again.schema_upgrade is None


def test_every_old_sqlite_store_upgrades_in_place_with_nothing_lost(tmp_path):
    tf = SPEC.to_dict()
    jax = SPEC.replace(backend="jax", image_size=16).to_dict()
    runs = [
        (
            "tf-run",
            tf,
            result_for(SPEC, 321.0, flags=["loss_not_falling"], env={"cpu_count": 8, "tensorflow": "2.17.0"}),
        ),
        ("jax-run", jax, result_for(SPEC.replace(backend="jax"), 99.0, backend="jax", backend_version="0.4.30")),
    ]
    expected = None
    Store(tmp_path / "new.sqlite").close()
    for version in range(1, HEAD):
        path = tmp_path / f"v{version}.sqlite"
        old_file(path, version, runs)
        with Store(path) as store:
            assert store.schema_upgrade == (version, HEAD)
            frame = store.runs().drop(columns=["heartbeat_at"], errors="ignore")
            samples = {run_id: list(store.samples(run_id)["duration_s"]) for run_id, _s, _r in runs}
            assert store._read("PRAGMA foreign_key_check") == []
        assert bookkeeping(path) == (migrations.revision_id(HEAD), HEAD)
        assert sqlite_layout(path) == sqlite_layout(tmp_path / "new.sqlite")  # as a new store's
        if expected is None:  # from v1, checked by hand; every later start must end the same
            by_id = frame.set_index("run_id")
            assert by_id.loc["tf-run", "examples_per_sec"] == 321.0 and by_id.loc["tf-run", "flags"] == [
                "loss_not_falling"
            ]
            assert by_id.loc["tf-run", "backend_version"] == "2.17.0" and by_id.loc["tf-run", "host_cpus"] == 8
            assert by_id.loc["jax-run", "backend"] == "jax" and by_id.loc["jax-run", "image_size"] == 16
            assert samples == {"tf-run": [0.5, 1.5, 2.5], "jax-run": [0.5, 1.5, 2.5]}
            expected = (frame, samples)
        assert frame.equals(expected[0]) and samples == expected[1], f"from v{version}"


def test_a_store_from_before_alembic_is_stamped_by_store_upgrade(db_at, capsys):
    Store(db_at).close()
    made = layout(db_at)
    with Store(db_at) as store, store._write("test") as conn:  # as dashbench before alembic left it
        conn.execute("DROP TABLE alembic_version")
    assert main(["store", "upgrade", "--db", str(db_at)]) == 0
    assert f"schema v{HEAD}, this dashbench's (nothing to upgrade)" in capsys.readouterr().out
    assert bookkeeping(db_at) == (migrations.revision_id(HEAD), HEAD)
    assert layout(db_at) == made


def test_a_store_newer_than_the_code_is_refused_in_one_line_and_left_as_it_is(db_at, capsys):
    Store(db_at).close()
    future = migrations.revision_id(HEAD + 1)
    with Store(db_at) as store, store._write("test") as conn:  # as dashbench v(HEAD + 1) leaves it
        conn.execute(f"UPDATE alembic_version SET version_num = '{future}'")
        conn.execute(
            f"UPDATE dashbench_schema SET version = {HEAD + 1}"
            if on_server(db_at)
            else f"PRAGMA user_version = {HEAD + 1}"
        )
    assert main(["store", "upgrade", "--db", str(db_at)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"schema v{HEAD + 1}, newer than this dashbench (v{HEAD})" in err and len(err.splitlines()) == 1
    with pytest.raises(SchemaVersionError, match="newer than this dashbench"):
        Store(db_at)
    with pytest.raises(SchemaVersionError, match="newer than this dashbench"):  # the runner too, under its lock
        migrate.upgrade_postgres(db_at, "db") if on_server(db_at) else migrate.upgrade_sqlite(db_at)
    assert bookkeeping(db_at) == (future, HEAD + 1)


# -- two processes at once -------------------------------------------------------------------------

CHILD = """
import json, sys
from dashbench.store import Store
import alembic.command  # noqa: F401 (loaded before the start, so both processes start together)
print("ready", flush=True)
sys.stdin.readline()
with Store(sys.argv[1]) as store:
    print(json.dumps(store.schema_upgrade), flush=True)
"""


def open_at_once(db, hold_lock, release) -> list:
    """Two processes open `db` together while this one holds the migration lock (`hold_lock`), so both
    find the store old and wait at the lock; `release()` lets them go. Their Store.schema_upgrade each."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(db)],
            cwd=ROOT,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    try:
        for child in children:
            assert child.stdout.readline().strip() == "ready", child.stderr.read()[-2000:]
        with hold_lock():
            for child in children:
                child.stdin.write("go\n")
                child.stdin.flush()
            release()
        outs = [child.communicate(timeout=120) for child in children]
        assert all(child.returncode == 0 for child in children), [err[-2000:] for _out, err in outs]
        return sorted(tuple(json.loads(out.strip().splitlines()[-1])) for out, _err in outs)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_two_processes_opening_an_old_sqlite_store_migrate_it_once(tmp_path):
    path = tmp_path / "old.sqlite"
    old_file(path, 1, [(f"run-{i}", SPEC.to_dict(), result_for(SPEC, float(i + 1))) for i in range(300)])
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode = WAL")  # as a store is: readers go on while a writer waits
    holder = sqlite3.connect(path, isolation_level=None)

    @contextlib.contextmanager
    def hold_lock():
        holder.execute("BEGIN IMMEDIATE")  # the write lock the migration takes
        yield
        holder.execute("COMMIT")

    assert open_at_once(path, hold_lock, lambda: time.sleep(1.0)) == [(1, HEAD), (HEAD, HEAD)]
    holder.close()
    with Store(path, read_only=True) as store:
        assert store.count_runs() == 300 and len(store.samples("run-7")) == 3
    assert bookkeeping(path) == (migrations.revision_id(HEAD), HEAD)


def test_two_processes_opening_an_empty_postgres_database_make_one_store(pg_url, pg_server):
    import psycopg

    holder = psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)
    key = postgres.advisory_key(migrate.LOCK_NAME)

    @contextlib.contextmanager
    def hold_lock():
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))
        yield
        holder.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def both_waiting():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            waiting = holder.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchone()[0]
            if waiting == 2:
                return
            time.sleep(0.05)
        raise AssertionError("the two processes never both waited at the lock")

    try:
        assert open_at_once(pg_url, hold_lock, both_waiting) == [(0, HEAD), (HEAD, HEAD)]
    finally:
        holder.close()
    assert bookkeeping(pg_url) == (migrations.revision_id(HEAD), HEAD)


def test_a_v10_postgres_store_upgrades_to_checking_its_samples_key_per_statement(pg_url):
    """v11 (0011): the samples -> runs key becomes statement-level triggers on PostgreSQL; a v10 store's
    samples stay, and the key still refuses a missing run's samples and takes a deleted run's."""
    import psycopg

    assert migrate.upgrade_postgres(pg_url, "db", to=10) == (0, 10)
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:

        def constraints():
            return {
                name
                for (name,) in conn.execute("SELECT conname FROM pg_constraint WHERE conrelid = 'samples'::regclass")
            }

        assert "samples_run_id_fkey" in constraints()
        for run_id in ("old-1", "old-2"):
            conn.execute("INSERT INTO runs (run_id, status, created_at) VALUES (%s, 'done', 1.0)", (run_id,))
            conn.execute(
                "INSERT INTO samples (run_id, idx, steps, duration_s)"
                " SELECT %s, k, 1, 0.5 FROM generate_series(0, 2) k",
                (run_id,),
            )
        assert migrate.upgrade_postgres(pg_url, "db") == (10, HEAD)
        assert "samples_run_id_fkey" not in constraints()
        counts = conn.execute("SELECT run_id, count(*) FROM samples GROUP BY 1 ORDER BY 1").fetchall()
        assert counts == [("old-1", 3), ("old-2", 3)]
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute("INSERT INTO samples (run_id, idx, steps, duration_s) VALUES ('none', 0, 1, 0.5)")
        conn.execute("DELETE FROM runs WHERE run_id = 'old-1'")
        assert conn.execute("SELECT DISTINCT run_id FROM samples").fetchall() == [("old-2",)]
    with Store(pg_url) as store:
        assert store.schema_upgrade is None and len(store.samples("old-2")) == 3


# -- the next schema change -----------------------------------------------------------------------


def test_the_next_schema_change_is_one_revision_file_run_on_both_databases(tmp_path, monkeypatch, pg_url, pg_server):
    import psycopg

    copy = tmp_path / "migrations"
    shutil.copytree(migrations.FOLDER, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(migrations, "FOLDER", copy)
    monkeypatch.setattr(migrations, "VERSIONS", copy / "versions")
    written = migrate.new_revision("a note on each run")
    assert (
        written == copy / "versions" / f"{HEAD + 1:04d}_a_note_on_each_run.py" and migrations.head_number() == HEAD + 1
    )
    text = written.read_text()
    assert f"revision = '{HEAD + 1:04d}'" in text and f"down_revision = '{HEAD:04d}'" in text
    written.write_text(
        text.replace(
            "raise NotImplementedError('write the step')", 'op.add_column("runs", sa.Column("note", types()["TEXT"]))'
        )
    )
    path = tmp_path / "r.sqlite"
    old_file(path, V9)  # both as dashbench before alembic left them: no alembic_version
    assert migrate.upgrade_postgres(pg_url, "db", to=V9) == (0, V9)
    assert postgres_layout(pg_url) == BEFORE["postgresql"]
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute("DROP TABLE alembic_version")
    assert migrate.upgrade_sqlite(path) == migrate.upgrade_postgres(pg_url, "db") == (V9, HEAD + 1)
    for db in (path, pg_url):
        assert "note" in [column[0] for column in layout(db)["runs"]["columns"]]
        assert bookkeeping(db) == (migrations.revision_id(HEAD + 1), HEAD + 1)
