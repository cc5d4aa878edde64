"""A real PostgreSQL server for the tests: `pg_server` (one per pytest process, so each xdist worker
has its own; initdb with fsync off costs ~1 s, less than coordinating one shared server's last user)
and `pg_url`, a fresh database per test. Debian's `postgresql` package provides the binaries; CI
installs it, and there a missing server fails instead of skipping."""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from dashbench.views.common import store_handles

SUPERUSER = "postgres"


def bindir() -> Path | None:
    """The folder holding initdb and postgres: pg_config's answer, else Debian's newest version."""
    candidates = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    return next((Path(c) for c in candidates if c and (Path(c) / "initdb").exists()), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Unavailable(RuntimeError):
    """No server can be started here: the binaries or the account to run them as are missing."""


def _as_user() -> dict:
    # PostgreSQL refuses to run as root: as root, run it as the `postgres` account Debian creates.
    if os.geteuid() != 0:
        return {}
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise Unavailable("running as root and there is no `postgres` account to run PostgreSQL as") from None
    return {"user": "postgres", "group": pwd.getpwnam("postgres").pw_gid}


@dataclass
class PgServer:
    folder: Path
    port: int
    process: subprocess.Popen
    argv: list = None  # the postmaster's command, to start it again on the same port and data (restart)
    user: dict = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def url(self, dbname: str = "postgres", user: str = SUPERUSER, driver: str = "postgresql+psycopg") -> str:
        return f"{driver}://{user}@127.0.0.1:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres", user: str = SUPERUSER):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user=user, dbname=dbname, autocommit=True)

    def crash(self) -> None:
        """What `pg_ctl -m immediate stop` does: SIGQUIT to the postmaster, which ends every backend at
        once, no checkpoint (the next start recovers from the WAL, as after a power cut)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)
            self.process.wait(timeout=60)

    def restart(self) -> None:
        """Start the crashed (or stopped) server again on its port and data folder; returns once it answers."""
        for attempt in range(50):  # the port may be in TIME_WAIT for a moment after the crash
            with open(self.folder / f"server-restart-{attempt}.log", "wb") as log:
                self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True, preexec_fn=_die_with_parent(), **self.user)
            if _wait_ready(self):
                return
            time.sleep(0.2)
        raise RuntimeError("PostgreSQL did not start again: " +
                           (self.folder / f"server-restart-{attempt}.log").read_text(errors="replace")[-2000:])

    def stop(self) -> None:
        """Fast shutdown of our own postmaster by its pid, SIGKILL if it lingers; then remove its folder."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _die_with_parent():
    """A preexec_fn: a test process killed outright (a CI timeout, a crashed xdist worker) runs no
    teardown, so the kernel then sends the postmaster SIGQUIT, PostgreSQL's immediate shutdown. It runs
    after the switch to `postgres` (a change of user clears the setting), where root's Python can no
    longer import anything: libc is loaded here, before the fork."""
    import ctypes

    prctl, PR_SET_PDEATHSIG, SIGQUIT = ctypes.CDLL(None, use_errno=True).prctl, 1, int(signal.SIGQUIT)
    return lambda: prctl(PR_SET_PDEATHSIG, SIGQUIT)


def start_server(durable: bool = False) -> PgServer:
    """A fresh server on a free port (also for bench/ scripts); Unavailable when none can start here.
    `durable`: commits wait for the WAL to reach the OS (synchronous_commit on, as a real server has it), so
    a crash (PgServer.crash) keeps every commit it answered; otherwise the last ~0.6 s of them may go."""
    found = bindir()
    if found is None:
        raise Unavailable("PostgreSQL server not installed (Debian: apt-get install postgresql)")
    user = _as_user()
    # Not under pytest's basetemp: that folder is 0700 root's, and the server runs as `postgres`.
    folder = Path(tempfile.mkdtemp(prefix="dashbench-pg-"))
    if user:
        os.chown(folder, pwd.getpwnam("postgres").pw_uid, user["group"])
    try:
        return _start_in(folder, found, user, durable)
    except BaseException:  # a failed initdb or start, an interrupt: no folder (or server) left behind
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _start_in(folder: Path, found: Path, user: dict, durable: bool = False) -> PgServer:
    data = folder / "data"
    subprocess.run([found / "initdb", "-D", data, "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--locale=C",
                    "--no-sync", "--no-instructions"], check=True, capture_output=True, **user)
    for attempt in range(3):  # another process may take the free port between the probe and the bind
        port = _free_port()
        argv = [found / "postgres", "-D", data, "-p", str(port), "-k", folder, "-c", "listen_addresses=127.0.0.1",
                "-c", "fsync=off", "-c", f"synchronous_commit={'on' if durable else 'off'}", "-c", "full_page_writes=off",
                "-c", "max_connections=200"]
        with open(folder / f"server-{attempt}.log", "wb") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=_die_with_parent(), **user)
        server = PgServer(folder, port, process, argv, user)
        try:
            if _wait_ready(server):
                return server
        except BaseException:
            process.kill()
            process.wait()
            raise
        process.kill()
        process.wait()
    text = (folder / "server-2.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"PostgreSQL did not start: {text}")


def _wait_ready(server: PgServer, seconds: float = 60) -> bool:
    import psycopg

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        try:
            server.connect().close()
            return True
        except psycopg.OperationalError:
            time.sleep(0.1)
    return False


def start_or_skip(durable: bool = False) -> PgServer:
    """start_server, or the test skipped where no server can start (failed in CI, which installs one)."""
    try:
        return start_server(durable)
    except Unavailable as exc:
        if os.environ.get("CI"):  # a missing server must not pass there as skipped tests
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def pg_server():
    server = start_or_skip()
    yield server
    server.stop()


@pytest.fixture
def pg_own_server():
    """A server of this test's own, on its own port and data folder, that it may crash and restart: durable,
    so a crash loses no commit it answered (fsync stays off: the OS, which does not crash here, keeps them)."""
    server = start_or_skip(durable=True)
    yield server
    server.stop()


_numbers = itertools.count()


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the test server, as a SQLAlchemy URL; dropped after the test."""
    name = f"test_{os.getpid()}_{next(_numbers)}"
    with pg_server.connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_server.url(name)
    # A dashboard run in this process keeps its store handle (views/common/store_handles.py): closed here, while
    # the database is still there, not at exit over connections the DROP cut.
    store_handles.forget()
    with pg_server.connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def create_reader(url: str, role: str | None = None) -> str:
    """A login role that can only SELECT in `url`'s database, now and in tables created later by
    the owner; returns the same URL with that role as its user."""
    import psycopg
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    role = role or f"reader_{parsed.database}"
    with psycopg.connect(host=parsed.host, port=parsed.port, user=parsed.username, dbname=parsed.database,
                         autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT CONNECT ON DATABASE "{parsed.database}" TO "{role}"')
        conn.execute(f'GRANT USAGE ON SCHEMA public TO "{role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        conn.execute(f'ALTER DEFAULT PRIVILEGES FOR ROLE "{parsed.username}" IN SCHEMA public '
                     f'GRANT SELECT ON TABLES TO "{role}"')
    return parsed.set(username=role).render_as_string(hide_password=False)


def skip_unless_the_store_takes_urls(url: str) -> None:
    """Skip a test of the Store on PostgreSQL while the Store still refuses URLs (its port lands apart)."""
    from dashbench.store import Store, StoreError

    try:
        Store(url).close()
    except StoreError as exc:
        if "is not accepted" in str(exc):
            pytest.skip("the Store does not open PostgreSQL URLs yet")
        raise


def create_password_role(server: PgServer, url: str, password: str, role: str | None = None) -> str:
    """A login role that owns `url`'s database and must give `password` over TCP (scram-sha-256: a line
    for that role alone ahead of the server's trust lines, so no other test's connection changes);
    returns `url` with that role and its password."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    role = role or f"owner_{parsed.database}"
    with server.connect() as conn:
        conn.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{password}'")
        conn.execute(f'ALTER DATABASE "{parsed.database}" OWNER TO "{role}"')
    with server.connect(parsed.database) as conn:
        conn.execute(f'ALTER SCHEMA public OWNER TO "{role}"')
    hba = server.folder / "data" / "pg_hba.conf"
    hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    import psycopg

    with server.connect() as conn:
        conn.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the reload is asynchronous: until a password is asked for
        try:
            psycopg.connect(host="127.0.0.1", port=server.port, user=role, dbname=parsed.database,
                            passfile=os.devnull).close()
        except psycopg.OperationalError:
            break
        time.sleep(0.1)
    return parsed.set(username=role, password=password).render_as_string(hide_password=False)
