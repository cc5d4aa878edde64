"""Read-only mode, asked for by a command's --read-only or DASHBENCH_READ_ONLY=1: a writing command or
a run refuses it in one line before anything is opened for writing."""

from __future__ import annotations

import os

from dashbench.store.errors import StoreError

READ_ONLY_ENV = "DASHBENCH_READ_ONLY"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def read_only_requested(flag: bool = False) -> bool:
    """`flag` (a command's --read-only), or DASHBENCH_READ_ONLY=1 (as the dashboard reads it)."""
    text = (os.environ.get(READ_ONLY_ENV) or "").strip().lower()
    if text not in _TRUE | _FALSE:
        raise StoreError(f"{READ_ONLY_ENV}: {os.environ.get(READ_ONLY_ENV)!r} is not a yes/no value; use 1 or 0")
    return flag or text in _TRUE


def refuse_if_read_only(what: str, flag: bool = False) -> None:
    """A writing command or a run in read-only mode: one line, nothing opened for writing."""
    if read_only_requested(flag):
        raise StoreError(f"db: cannot {what}: read-only mode ({READ_ONLY_ENV}=1) never writes to the database")
