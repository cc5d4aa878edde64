"""The files SQLite keeps beside a database (-wal, -shm, -journal), and how a reader that opened the
database read-only (mode=ro: the file's descriptor is O_RDONLY) leaves none of them behind."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path


def read_only_mode(path: Path) -> str:
    """The SQLite open mode in which a connection that only reads may tidy (see tidy): "rw" where nothing
    waits in a WAL file and the file and its folder are writable, else "ro". A "ro" connection to a WAL database leaves its -wal and -shm
    files behind when it closes; an "rw" one (kept from writing by PRAGMA query_only) removes them as
    the last connection out, and, with an empty WAL, has nothing to fold into the file: the main file
    is untouched either way."""
    wal, journal = (path.with_name(path.name + suffix) for suffix in ("-wal", "-journal"))
    try:  # (a rollback journal left by a crashed writer would be rolled back by an "rw" reader)
        pending = (wal.exists() and wal.stat().st_size > 0) or journal.exists()
    except OSError:
        pending = True
    writable = os.access(path, os.W_OK) and os.access(path.resolve().parent, os.W_OK)
    return "rw" if writable and not pending else "ro"


def tidy(path: Path) -> None:
    """After a mode=ro reader closed: remove the -wal and -shm files it could not, as SQLite does for
    the last connection out. A short "rw" connection that only reads (query_only) and closes, made
    only where read_only_mode allows "rw" (nothing waiting in the -wal; file and folder writable);
    while any other connection is open (a writer, this process's watcher) SQLite leaves the files to
    it. A tidy that fails leaves two harmless files: never an error."""
    if read_only_mode(path) != "rw" or not any(path.with_name(path.name + s).exists() for s in ("-wal", "-shm")):
        return
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, isolation_level=None, timeout=0)
    except sqlite3.Error:
        return
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # joins the WAL, so the close can end it
    except sqlite3.Error:
        pass
    finally:
        conn.close()
