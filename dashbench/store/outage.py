"""A store that cannot be reached for a while: which errors say so, and how long a run waits one out.

A team store is a server, and servers restart (an upgrade, a failover, a crash); an SQLite file lives on a
disk that may fill up or, on a network mount, vanish for a moment. None of these means the run is wrong:
the write is tried again once the store is back. Which errors are such an outage is decided here, once, so
the run process (jobs/store_buffer.py), the queue and `sweep` agree. Everything else (a refusal, a missing
right, bad data) is not an outage and is raised as before.
"""

from __future__ import annotations

import sqlite3
import time

from dashbench.store.errors import StoreError, StoreUnreachable  # noqa: F401 (raised by the store's callers)
from dashbench.store.ids import env_seconds

# How long a run waits for a store it cannot reach before it ends (its samples then go to a local bundle).
OUTAGE_S = 600.0
OUTAGE_ENV = "DASHBENCH_STORE_OUTAGE_S"

# The SQLite errors of a disk that is full or gone for a moment (SQLITE_FULL: ENOSPC or a file-size
# limit; SQLITE_IOERR*: a network mount that stopped answering; SQLITE_CANTOPEN: its folder gone).
_SQLITE_OUTAGES = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN")
# What libpq or the server says when the connection is refused, cut, or the server is restarting.
_SERVER_OUTAGES = (
    "connection refused",
    "server closed the connection",
    "connection is lost",
    "could not connect",
    "the database system is",
    "terminating connection",
    "connection to server",
    "no route to host",
    "timeout expired",
    "network is unreachable",
    "consuming input failed",
    "sending query failed",
    "connection timed out",
    "could not receive data",
    "could not send data",
    "ssl syscall error",
    "eof detected",
    "connection failed",
    "the connection is closed",
    "server conn crashed",
)
# Connection failures that are answers, not silence: a wrong password or database does not heal by waiting.
_REFUSALS = (
    "password authentication failed",
    "no password supplied",
    "does not exist",
    "permission denied",
    "no pg_hba.conf entry",
)
# SQLSTATE classes of a connection cut (08) and of a server shutting down or starting up (57P0x).
_OUTAGE_STATES = ("08", "57P01", "57P02", "57P03")


def outage_s() -> float:
    """DASHBENCH_STORE_OUTAGE_S: how long a run waits for an unreachable store (seconds, 0: not at all)."""
    return env_seconds(OUTAGE_ENV, OUTAGE_S, 0, 7 * 86400)


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` (a store error, or the driver's error it was raised from) is the store being away."""
    if isinstance(exc, StoreUnreachable):
        return True
    for cause in _chain(exc):
        if isinstance(cause, sqlite3.Error):
            name = getattr(cause, "sqlite_errorname", "") or ""
            return name.startswith(_SQLITE_OUTAGES) or "disk is full" in str(cause) or "disk I/O error" in str(cause)
        if _is_psycopg_outage(cause):
            return True
    return False


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _is_psycopg_outage(exc: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:
        return False
    if not isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return False
    state = getattr(exc, "sqlstate", None) or ""
    if state:
        return state.startswith(_OUTAGE_STATES)
    text = str(exc).lower()
    return any(words in text for words in _SERVER_OUTAGES) and not any(words in text for words in _REFUSALS)


def unreachable(exc: BaseException, message: str) -> StoreError:
    """The one-line StoreError to raise for a driver's `exc`: a StoreUnreachable when it is an outage."""
    return StoreUnreachable(message) if is_outage(exc) else StoreError(message)


class PollWait:
    """A command's wait for a store it polls, as `sweep` waits for its points and `run --cluster` for its run
    (the runs' own processes wait the outage out themselves): said once as it starts and once as it ends.
    Past outage_s() the store's error is raised, or `past(exc, seconds)`'s; any other error at once."""

    def __init__(self, where, say, waits: str, goes_on: str, pause_s: float, past=None):
        self.db = where  # the store's location(), shown with its password masked
        self.say, self.waits, self.goes_on, self.pause_s, self.past = say, waits, goes_on, pause_s, past
        self.since = None

    def wait(self, exc: StoreError) -> None:
        """After `exc`, a failed poll: pause before the next one, or raise when waiting is no answer."""
        if not is_outage(exc):
            raise exc
        if self.since is None:
            self.since = time.monotonic()
            self.say(f"waiting for the store {self.db}: {exc}; {self.waits} (up to {outage_s():g} s, {OUTAGE_ENV})")
        elif time.monotonic() - self.since >= outage_s():
            raise exc if self.past is None else self.past(exc, outage_s())
        time.sleep(self.pause_s)

    def back(self) -> None:
        """A poll that reached the store: the wait, if there was one, is over."""
        if self.since is not None:
            self.say(f"the store {self.db} answers again after {time.monotonic() - self.since:.1f} s; {self.goes_on}")
            self.since = None
