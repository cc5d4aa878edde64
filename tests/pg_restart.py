"""A PostgreSQL server of one test's own that it may crash and start again (`pg_own`): the tests' shared
server (pg_server.py) must never go down under another test. `crash` and `start_again` are the server's
own PgServer.crash (`pg_ctl -m immediate stop`'s SIGQUIT) and PgServer.restart (same port, same data)."""

from __future__ import annotations

import pytest
from pg_server import PgServer, start_or_skip


def crash(server: PgServer) -> None:
    server.crash()


def start_again(server: PgServer) -> None:
    server.restart()


@pytest.fixture
def pg_own():
    """A server of this test's own, that it may crash and start again; stopped and removed after it, with
    the dashboard's kept store handles forgotten (they point at its port)."""
    server = start_or_skip()
    yield server
    from dashbench.views.common import store_handles

    store_handles.forget()
    server.stop()
