"""A command behind another process's write lock says so as its wait starts:
`waiting for the database … (locked by another process) …` on stderr, as a run waiting for its
device says `waiting for the device …`, then it goes on once the lock is gone."""

import os
import queue
import sqlite3
import subprocess
import sys
import threading

from fixtures.cli_runs import fill

from dashbench.store import Store, database

WAITING = "(locked by another process)"


def stderr_lines(proc: subprocess.Popen) -> "queue.Queue[str | None]":
    """The process's stderr, line by line, read in a thread (None at its end)."""
    lines: "queue.Queue[str | None]" = queue.Queue()

    def read():
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def test_an_import_behind_a_held_write_lock_says_it_waits_and_then_imports(tmp_path):
    source, db = tmp_path / "source.sqlite", tmp_path / "locked.sqlite"
    (run_id,) = fill(source)
    bundle = tmp_path / "bundle.json"
    with Store(source) as store:
        from dashbench.store import export_bundle

        export_bundle(store, bundle)
    fill(db, label="already here")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # this test process holds the write lock
    env = {**os.environ, "DASHBENCH_BUSY_TIMEOUT_S": "600"}  # the import waits; it must not give up first
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashbench", "import", str(bundle), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        lines = stderr_lines(proc)
        said = []
        while True:  # while the lock is held, the import can only wait, so its line must come first
            line = lines.get(timeout=300)
            assert line is not None, f"the import ended while the lock was held: {''.join(said)}"
            said.append(line)
            if WAITING in line:
                break
        assert said[-1].startswith(f"waiting for the database {db} (locked by another process)"), said
        assert proc.poll() is None  # still waiting
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, (out, "".join(said), list(iter(lines.get, None)))
    with Store(db, read_only=True) as store:
        assert store.get_run(run_id)["status"] == "done"
        assert len(store.run_ids()) == 2


def test_a_write_with_no_lock_to_wait_for_says_nothing(tmp_path, monkeypatch):
    told = []
    monkeypatch.setattr(database, "LOCK_WAIT_NOTICE", told.append)
    db = tmp_path / "free.sqlite"
    fill(db)
    assert told == []
    # The busy timeout is set back after the attempt that does not wait: a later wait still waits.
    with Store(db) as store:
        store.check_writable()
        assert store._db.conn.execute("PRAGMA busy_timeout").fetchone()[0] == int(store.busy_timeout_s * 1000)
    assert told == []


def test_a_write_that_times_out_behind_the_lock_said_it_waited(tmp_path, monkeypatch):
    """In-process, with a short busy timeout: the write said it waited, naming the file, and then
    failed in one line."""
    from dashbench.store import StoreBusyError

    told = []
    monkeypatch.setattr(database, "LOCK_WAIT_NOTICE", told.append)
    monkeypatch.setenv("DASHBENCH_BUSY_TIMEOUT_S", "0.2")
    db = tmp_path / "short.sqlite"
    (run_id,) = fill(db)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Store(db) as store:
            try:
                store.delete_runs([run_id])
            except StoreBusyError as exc:
                assert "is locked by another process" in str(exc)
            else:
                raise AssertionError("the delete did not wait for the lock")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert told == [db]


def test_opening_an_old_store_behind_another_process_lock_says_it_waits_then_migrates(tmp_path):
    """Another process's migration (here: this test's held write lock) keeps an opening process from
    migrating: it says the same line as a waiting write, and migrates once the lock is gone."""
    from fixtures.old_stores import HEAD, old_file
    from fixtures.stored_runs import SPEC, result_for

    db = tmp_path / "old.sqlite"
    old_file(db, 1, [("run-0", SPEC.to_dict(), result_for(SPEC, 1.0))])
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("PRAGMA journal_mode = WAL")  # as the migrating process left it before taking the lock
    holder.execute("BEGIN IMMEDIATE")
    env = {**os.environ, "DASHBENCH_BUSY_TIMEOUT_S": "600"}
    code = "import sys; from dashbench.store import Store; print(Store(sys.argv[1]).schema_upgrade)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        lines = stderr_lines(proc)
        said = []
        while not said or WAITING not in said[-1]:  # while the lock is held, the open can only wait
            line = lines.get(timeout=300)
            assert line is not None, f"the open ended while the lock was held: {''.join(said)}"
            said.append(line)
        assert said[-1].startswith(f"waiting for the database {db} (locked by another process)"), said
        assert proc.poll() is None
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, (out, "".join(said), list(iter(lines.get, None)))
    assert out.strip() == str((1, HEAD))
    with Store(db, read_only=True) as store:
        assert store.get_run("run-0")["status"] == "done"


def test_opening_a_postgres_database_another_process_migrates_says_it_waits_then_opens(pg_url):
    """The same on PostgreSQL: the schema's advisory lock held (as a migrating process holds it)."""
    import psycopg

    from dashbench.store import migrate
    from dashbench.store.postgres import server as postgres

    holder = psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)
    key = postgres.advisory_key(migrate.LOCK_NAME)
    holder.execute("SELECT pg_advisory_lock(%s)", (key,))
    env = {**os.environ, "DASHBENCH_BUSY_TIMEOUT_S": "600"}
    code = "import sys; from dashbench.store import Store; print(Store(sys.argv[1]).schema_upgrade)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, pg_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        lines = stderr_lines(proc)
        said = []
        while not said or WAITING not in said[-1]:
            line = lines.get(timeout=300)
            assert line is not None, f"the open ended while the lock was held: {''.join(said)}"
            said.append(line)
        assert said[-1].startswith("waiting for the database postgresql+psycopg://"), said
        assert proc.poll() is None
    finally:
        holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
        holder.close()
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, (out, "".join(said), list(iter(lines.get, None)))
    assert out.strip() == str((0, migrate.migrations.head_number()))
