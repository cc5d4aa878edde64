"""A PostgreSQL server of one test's own that it may crash and start again (`pg_own`): the tests' shared
server (pg_server.py) must never go down under another test. `crash` is `pg_ctl -m immediate stop` (every
backend ended at once, no checkpoint: the next start recovers from the WAL, as after a power cut);
`start_again` starts the postmaster with the command line it recorded (postmaster.opts), on the same port
and data folder, as `pg_ctl restart` does."""

from __future__ import annotations

import shlex
import subprocess
import time

import pytest
from pg_server import PgServer, _as_user, _die_with_parent, _wait_ready, bindir, start_or_skip


def crash(server: PgServer) -> None:
    """`pg_ctl -m immediate stop` on this test's own server (its data folder names it, no other)."""
    subprocess.run([bindir() / "pg_ctl", "stop", "-m", "immediate", "-w", "-D", server.folder / "data"],
                   check=True, capture_output=True, **_as_user())
    server.process.wait(timeout=60)


def start_again(server: PgServer) -> None:
    """The crashed server started again on its port and data folder; returns once it answers."""
    argv = shlex.split((server.folder / "data" / "postmaster.opts").read_text())
    for attempt in range(50):  # the port may be held a moment longer by the crashed postmaster's socket
        with open(server.folder / f"server-again-{attempt}.log", "wb") as log:
            server.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                              preexec_fn=_die_with_parent(), **_as_user())
        if _wait_ready(server):
            return
        server.process.wait()
        time.sleep(0.2)
    raise RuntimeError("PostgreSQL did not start again: "
                       + (server.folder / f"server-again-{attempt}.log").read_text(errors="replace")[-2000:])


@pytest.fixture
def pg_own():
    """A server of this test's own, that it may crash and start again; stopped and removed after it."""
    server = start_or_skip()
    yield server
    from dashbench.views import store_handles

    store_handles.forget()
    server.stop()
