"""Ids, times and hosts: what every part of the store stamps on a row. No SQL here."""

from __future__ import annotations

import datetime as _dt
import os
import secrets
import socket
import time

from dashbench.results.result import short_id  # noqa: F401  (re-exported by the store)
from dashbench.store.errors import StoreError

# A run that a cluster started on one of its nodes is stamped with the node's name (fleet/launch.py sets
# it): several nodes may share one machine's host name, and the name is what the cluster calls it.
HOST_ENV = "DASHBENCH_HOST"


def this_host() -> str:
    return os.environ.get(HOST_ENV) or socket.gethostname()


def new_run_id() -> str:
    # Sortable by time and unique across machines, so bundles from many hosts merge without clashes.
    return f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def new_sweep_id() -> str:
    # The CLI's sweeps and the Run page's share one format; views/compare tells sweeps apart by the tail.
    return "sweep-" + new_run_id()


def now() -> float:
    # Microsecond resolution, so a time survives the ISO text of an export bundle unchanged.
    return round(time.time(), 6)


def iso(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).isoformat()


def pid_alive(pid: int | None, started_at: float | None = None) -> bool:
    """Whether `pid` is still the process that started the run (not a zombie, not a reused pid)."""
    if not pid:
        return False
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        # A process created after the run started is a reused pid, not our run.
        if started_at is not None and proc.create_time() > started_at + 2.0:
            return False
        return True
    except (psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
        return False


def env_seconds(name: str, default: float, low: float, high: float, low_open: bool = False) -> float:
    """A number of seconds from the environment variable `name` (`default` when unset); a value that is
    not a number in range is a StoreError naming the variable and the range."""
    import os

    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not ((low < value) if low_open else (low <= value)) or not value <= high:
        above = "above" if low_open else "from"
        raise StoreError(f"{name}: {text!r} is not a number of seconds {above} {low:g} to {high:g}")
    return value
