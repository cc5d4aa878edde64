"""The tests' own PostgreSQL server: it starts, gives each test a fresh database, and leaves no
process behind when stopped."""

import os

import pytest
import sqlalchemy as sa
from fixtures.pg_server import create_reader, start_or_skip


def test_each_test_gets_a_fresh_database_it_can_create_tables_in(pg_url):
    assert pg_url.startswith("postgresql+psycopg://postgres@127.0.0.1:")
    engine = sa.create_engine(pg_url)
    try:
        with engine.begin() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")).scalar() == 0
            conn.execute(sa.text("CREATE TABLE t (x integer)"))
            conn.execute(sa.text("INSERT INTO t VALUES (1), (2)"))
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT sum(x) FROM t")).scalar() == 3
    finally:
        engine.dispose()


def test_the_reader_role_can_select_and_cannot_write(pg_url):
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE before_grant (x integer)"))
    reader_url = create_reader(pg_url)
    with engine.begin() as conn:  # made after the grant: the default privileges cover it
        conn.execute(sa.text("CREATE TABLE after_grant (x integer)"))
        conn.execute(sa.text("INSERT INTO after_grant VALUES (7)"))
    engine.dispose()
    reader = sa.create_engine(reader_url)
    try:
        with reader.connect() as conn:
            assert conn.execute(sa.text("SELECT x FROM after_grant")).scalar() == 7
            assert conn.execute(sa.text("SELECT count(*) FROM before_grant")).scalar() == 0
        for statement in (
            "INSERT INTO after_grant VALUES (8)",
            "DELETE FROM before_grant",
            "CREATE TABLE t (x integer)",
        ):
            with reader.connect() as conn, pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
                conn.execute(sa.text(statement))
    finally:
        reader.dispose()


def test_a_stopped_server_leaves_no_process_and_no_folder():
    server = start_or_skip()
    pid, folder = server.pid, server.folder
    with server.connect() as conn:
        assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != pid  # a backend, not the postmaster
    # Every process of the server (checkpointer, writers, backends) is a child of the postmaster.
    children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(p) == pid]
    assert children
    server.stop()
    for gone in [pid, *children]:
        with pytest.raises(ProcessLookupError):
            os.kill(gone, 0)
    assert not folder.exists()


def _parent(pid: str) -> int | None:
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def test_a_server_goes_when_its_test_process_is_killed_outright(tmp_path):
    # SIGKILL runs no fixture teardown: the server must not outlive the process that started it.
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    start_or_skip().stop()  # skips here where no server can start
    script = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from fixtures.pg_server import start_server\n"
        "server = start_server(); print(server.pid, server.folder, flush=True); time.sleep(600)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(Path(__file__).resolve().parents[1])], stdout=subprocess.PIPE, text=True
    )
    pid, folder = child.stdout.readline().split()
    pid = int(pid)
    os.kill(pid, 0)
    child.send_signal(signal.SIGKILL)
    child.wait()
    for _ in range(600):  # a bounded wait for the event, not a timing
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    import shutil

    shutil.rmtree(folder, ignore_errors=True)  # nobody was left to remove it


def test_a_server_that_cannot_start_leaves_no_folder(monkeypatch):
    import subprocess
    import tempfile

    from fixtures import pg_server

    start_or_skip().stop()  # skips here where no server can start
    found, made, real_mkdtemp = pg_server.bindir(), [], tempfile.mkdtemp

    def mkdtemp(**kwargs):
        made.append(real_mkdtemp(**kwargs))
        return made[-1]

    def initdb_fails(*args, **kwargs):
        raise subprocess.CalledProcessError(1, "initdb")

    monkeypatch.setattr(pg_server, "bindir", lambda: found)
    monkeypatch.setattr(pg_server.tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(pg_server.subprocess, "run", initdb_fails)
    with pytest.raises(subprocess.CalledProcessError):
        pg_server.start_server()
    assert len(made) == 1 and not os.path.exists(made[0])
