"""The files SQLite keeps beside a database (-wal, -shm, -journal), and how to open a database for
reading only without leaving them behind."""

from __future__ import annotations

import os
from pathlib import Path


def read_only_mode(path: Path) -> str:
    """The SQLite open mode for reading only: "rw" where nothing waits in a WAL file and the file and
    its folder are writable, else "ro". A "ro" connection to a WAL database leaves its -wal and -shm
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
