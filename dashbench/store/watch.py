"""A token that changes whenever a database file changes: what the dashboard keys its cached reads on,
so a rerun that changed nothing reads nothing again, and a new run or an import shows at once.

SQLite's `PRAGMA data_version` changes when *another* connection commits, so each database gets one
long-lived read-only connection of this process that only ever asks that; the pages' own writes go
through other connections and count. A file replaced under the same name (a copied-in database) has
a new inode: its watcher is opened again.
"""

from __future__ import annotations

import atexit
import itertools
import os
import sqlite3
import threading
from collections import OrderedDict
from pathlib import Path

from dashbench.store.sidecars import tidy

_KEEP = 8  # watchers kept open (a dashboard has one database; tests open many)
_lock = threading.Lock()
_watchers: OrderedDict = OrderedDict()  # resolved path -> (inode, serial, connection or None)
_serials = itertools.count(1)


def change_token(path) -> tuple:
    """(path, inode, watcher serial, data_version): equal tokens mean an unchanged database."""
    path = Path(path).expanduser().resolve()
    try:
        stat = path.stat()
    except OSError:
        return (str(path), None, 0, 0)
    inode = (stat.st_dev, stat.st_ino)
    with _lock:
        entry = _watchers.get(path)
        if entry is None or entry[0] != inode:
            if entry is not None:
                _close(entry, path)
            entry = (inode, next(_serials), _open(path))
            _watchers[path] = entry
        _watchers.move_to_end(path)
        while len(_watchers) > _KEEP:
            oldest, old_entry = _watchers.popitem(last=False)
            _close(old_entry, oldest)
        inode, serial, conn = entry
        if conn is None:  # cannot watch (no -shm possible, e.g. a read-only folder): nobody writes there
            return (str(path), inode, serial, (stat.st_size, stat.st_mtime_ns))
        try:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            _close(_watchers.pop(path), path)
            return (str(path), inode, serial, (stat.st_size, stat.st_mtime_ns, "unwatched"))
        return (str(path), inode, serial, version)


def _open(path: Path) -> sqlite3.Connection | None:
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")  # it only watches: opened as a read-only Store is, tidied on close
        conn.execute("PRAGMA data_version").fetchone()
        return conn
    except sqlite3.Error:
        return None


def _close(entry, path: Path) -> None:
    conn = entry[2]
    if conn is not None:
        conn.close()
        tidy(path)


def forget(path=None) -> None:
    """Close the watcher of one database (or all): e.g. before its file is deleted."""
    with _lock:
        keys = list(_watchers) if path is None else [Path(path).expanduser().resolve()]
        for key in keys:
            entry = _watchers.pop(key, None)
            if entry is not None:
                _close(entry, key)


def _pid_guard() -> None:
    # A forked child must not share the parent's SQLite handles.
    _watchers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pid_guard)
# Closed on the way out, so a dashboard leaves no -wal/-shm files behind (sidecars.tidy).
atexit.register(forget)
