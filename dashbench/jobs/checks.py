"""`dashbench doctor` as a background process, for the Run page's "Check this machine" button.

Started detached (its own session), as runs are, so it finishes and stores its verdict even if the
dashboard restarts; its output goes to a log beside the database. One check per database at a time.
No TensorFlow here.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from dashbench.jobs import background

# The check command before `--db DB --json`; a module attribute so tests can put a stand-in behind it.
DOCTOR_COMMAND = [sys.executable, "-m", "dashbench", "doctor"]
_checks: dict[str, tuple[subprocess.Popen, float, Path]] = {}  # resolved db -> (process, started, log)
_lock = threading.Lock()


def launch(db_path=None) -> int:
    """Start `dashbench doctor` for this database unless one is already going; returns its pid."""
    db = background.db_key(db_path)
    with _lock:
        current = _checks.get(db)
        if current is not None and current[0].poll() is None:
            return current[0].pid
        proc, log_path = start_detached(DOCTOR_COMMAND, db, "doctor")
        _checks[db] = (proc, time.time(), log_path)
        return proc.pid


def start_detached(command: list[str], db, log_name: str) -> tuple[subprocess.Popen, Path]:
    """`command` in the background (jobs/background.py), its output to a new log named for it."""
    log_path = background.log_folder(db) / f"{log_name}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    return background.start(command, db, log_path), log_path


def state(db_path=None) -> dict | None:
    """The latest check this process started for the database: running, its exit code when it has
    ended (0 ok or warning, 1 an error verdict, else it failed), its start time and log; None if none."""
    with _lock:
        current = _checks.get(background.db_key(db_path))
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
