"""Starting a dashbench command in the background, the one way runs, machine checks and batch
searches are started: in a session of its own (it outlives the dashboard, and a cancel ends its
process group), stdin closed, its output appended to a log; the database is named by --db, or for a
server by DASHBENCH_DB (a command line is visible to every user: ps). No TensorFlow here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from dashbench.store import default_db_path, location


def db_key(db_path) -> str:
    """The database's full path, or a server's URL (a ServerURL: shown masked, its .url opens it)."""
    where = location(db_path) if db_path else default_db_path()
    return where if getattr(where, "url", None) else str(where.resolve())


def log_folder(db) -> Path:
    """Where a background command's log goes: beside the database file, or this host's data folder."""
    if getattr(db, "url", None):
        return Path.home() / ".local" / "share" / "dashbench" / "logs"
    return Path(db).parent / "logs"


def start(command: list[str], db, log_path: Path, env: dict | None = None) -> subprocess.Popen:
    """`command` on the database with --json, detached, its output appended to `log_path`; `env`
    adds to this process's environment."""
    extra, where = ({"DASHBENCH_DB": db.url}, []) if getattr(db, "url", None) else ({}, ["--db", db])
    extra.update(env or {})
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [*command, *where, "--json"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env={**os.environ, **extra} if extra else None,
        )
