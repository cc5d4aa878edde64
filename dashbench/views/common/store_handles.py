"""One open store per database and mode, kept across script runs and sessions of the dashboard process.

Opening a Store and closing it again on every script run cost a tenth of what a new visitor is allowed
(the close looks at SQLite's side files each time; docs/history/performance.md). A Store is thread-safe (its lock guards
its one SQLite connection, or its one pooled server connection), so the sessions' script threads share it.
It still sees every commit: each read is its own transaction (SQLite's autocommit, a server's snapshot per
statement), so a new run shows on the next rerun as before. A file replaced under the same name (a
copied-in database: a new inode) or gone is opened again; a store that fails to open is not kept, so its
message shows on every run until it opens.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections import OrderedDict
from typing import Any

from dashbench.store import StoreUnreachable  # noqa: F401  (app.py's: a server gone, said as an outage)

_KEEP = 8  # handles kept open (a dashboard has one database; a test process opens many)
_lock = threading.Lock()
_handles: OrderedDict = OrderedDict()  # (location, read_only) -> (file identity or None, Store)


def shared_store(settings) -> tuple[Any, str | None]:
    """(store, None) or (None, message), as context.open_store, but the store is shared: never close it."""
    from dashbench.views.common import context

    key = (_location(settings.db_path), bool(settings.read_only))
    identity = _identity(settings.db_path)
    with _lock:
        entry = _handles.get(key)
        if entry is not None and entry[0] == identity and identity != "gone":
            _handles.move_to_end(key)
            return entry[1], None
        if entry is not None:
            _close(_handles.pop(key))
        store, error = context.open_store(settings)  # under the lock: two first visitors open it once
        if store is None:
            return None, error
        _handles[key] = (_identity(settings.db_path), store)  # after the open, which may create the file
        while len(_handles) > _KEEP:
            _close(_handles.popitem(last=False)[1])
        return store, None


def reachable(settings) -> bool:
    """Whether the store answers now: one read of its change token on the shared handle (which gives up a
    connection the server dropped and takes a fresh one), or a first open where none is kept."""
    from dashbench.store import StoreError
    from dashbench.views.common import context

    store, error = shared_store(settings)
    if store is None:
        return not context.is_outage(error)  # another refusal is no outage: the page's own run shows it
    try:
        store.change_token()
    except StoreError:
        return False
    return True


def forget() -> None:
    """Close every kept handle (a test's end, or before the files are deleted)."""
    with _lock:
        while _handles:
            _close(_handles.popitem()[1])


def _location(db_path) -> str:
    return getattr(db_path, "url", None) or str(db_path)  # a server's URL with its password: the key only


def _identity(db_path):
    """What tells a file replaced under the same name from the one opened: (device, inode); "gone" when
    there is no file to stat (then the open's own check says why); None for a server."""
    if getattr(db_path, "url", None):
        return None
    try:
        stat = os.stat(db_path)
    except (OSError, ValueError):
        return "gone"
    return (stat.st_dev, stat.st_ino)


def _close(entry) -> None:
    # A session still reading the old handle finishes its read first (the Store's lock); its next read
    # of that handle fails, and its next script run gets the new one.
    try:
        entry[1].close()
    except Exception:  # a server already gone: nothing left to give back
        pass


def _pid_guard() -> None:
    # A forked child must not share the parent's SQLite handles or pooled connections.
    _handles.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pid_guard)
# Closed on the way out, so a read-only dashboard leaves no -wal/-shm files behind (sidecars.tidy).
atexit.register(forget)
