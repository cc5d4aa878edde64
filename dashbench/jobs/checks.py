"""`dashbench doctor` as a background process, for the Run page's "Check this machine" button.

Started detached (its own session), as runs are, so it finishes and stores its verdict even if the
dashboard restarts; its output goes to a log beside the database. One check per database at a time.
No TensorFlow here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from dashbench.store import default_db_path, location

# The check command before `--db DB --json`; a module attribute so tests can put a stand-in behind it.
DOCTOR_COMMAND = [sys.executable, "-m", "dashbench", "doctor"]
_checks: dict[str, tuple[subprocess.Popen, float, Path]] = {}  # resolved db -> (process, started, log)
_lock = threading.Lock()


def _key(db_path) -> str:
    """The database's full path, or a server's URL (a ServerURL: shown masked, its .url opens it)."""
    where = location(db_path) if db_path else default_db_path()
    return where if getattr(where, "url", None) else str(where.resolve())


def _log_folder(db: str) -> Path:
    if getattr(db, "url", None):  # a server: this host's data folder
        return Path.home() / ".local" / "share" / "dashbench" / "logs"
    return Path(db).parent / "logs"


def launch(db_path=None) -> int:
    """Start `dashbench doctor` for this database unless one is already going; returns its pid."""
    db = _key(db_path)
    with _lock:
        current = _checks.get(db)
        if current is not None and current[0].poll() is None:
            return current[0].pid
        proc, log_path = start_detached(DOCTOR_COMMAND, db, "doctor")
        _checks[db] = (proc, time.time(), log_path)
        return proc.pid


def start_detached(command: list[str], db, log_name: str) -> tuple[subprocess.Popen, Path]:
    """`command` on the database with --json, in a session of its own (it outlives the dashboard), its
    output to a new log named for it in the database's log folder."""
    log_path = _log_folder(db) / f"{log_name}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # A server's URL travels in the environment: a command line is visible to every user (ps).
    env, where = ({**os.environ, "DASHBENCH_DB": db.url}, []) if getattr(db, "url", None) else (None, ["--db", db])
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [*command, *where, "--json"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            env=env,
        )
    return proc, log_path


def state(db_path=None) -> dict | None:
    """The latest check this process started for the database: running, its exit code when it has
    ended (0 ok or warning, 1 an error verdict, else it failed), its start time and log; None if none."""
    with _lock:
        current = _checks.get(_key(db_path))
    if current is None:
        return None
    proc, started, log_path = current
    code = proc.poll()
    return {
        "running": code is None,
        "returncode": code,
        "started_at": started,
        "log_path": str(log_path),
        "pid": proc.pid,
    }


def log_tail(path: str, lines: int = 3) -> str:
    try:
        text = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])
