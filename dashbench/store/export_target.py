"""Where an export bundle may be written. `export --out` once renamed its bundle over whatever the path
named: the live database (replaced by JSON), a FIFO, and, run as root, /dev/null itself. Now:

- the database being exported, its -wal/-shm/-journal, and any other SQLite file are refused;
- a FIFO or a character device (/dev/null, a terminal) is written through, and stays what it was;
- a folder, a block device or a socket is refused;
- "-" is stdout;
- a regular file (an earlier bundle) is refused unless `replace` (`export --force`), as `cp -n` keeps
  it; replaced, it is replaced whole: written aside and renamed, so a crash never leaves half a bundle
  under the real name.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path
from typing import Callable, TextIO

from dashbench.store.database import StoreError

STDOUT = "-"
SQLITE_HEADER = b"SQLite format 3\x00"
SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal")


def write_bundle(
    out: str | os.PathLike, write: Callable[[TextIO], None], database: Path, replace: bool = False
) -> None:
    """Call `write` with a text file for `out` (see the module's rules; `replace`: an existing regular
    file may be replaced); a refusal or a write error is a StoreError naming `out`, with nothing written."""
    if str(out) == STDOUT:
        write(sys.stdout)
        sys.stdout.write("\n")
        sys.stdout.flush()
        return
    path = Path(out).expanduser()
    status = _stat(path)
    refusal = _refusal(path, status, database)
    if refusal:
        raise StoreError(f"out: {refusal}; nothing was written")
    if status is not None and stat.S_ISREG(status.st_mode) and not replace:
        raise StoreError(
            f"out: {path} already exists; nothing was written (pass --force to replace it, or give another name)"
        )
    if status is not None and not stat.S_ISREG(status.st_mode):
        try:  # no rename: the FIFO or device stays in its place
            with open(path, "w", encoding="utf-8") as fh:
                write(fh)
        except OSError as exc:
            raise StoreError(f"out: cannot write {path}: {exc.strerror or exc}") from None
        return
    # A link to a bundle: the bundle it names is replaced, the link stays.
    real = Path(os.path.realpath(path)) if status is not None else path
    tmp = real.with_name(real.name + ".tmp")
    refusal = _refusal(tmp, _stat(tmp), database)
    if refusal:
        raise StoreError(f"out: {refusal} (the file export writes aside first); nothing was written")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            write(fh)
        os.replace(tmp, real)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StoreError(f"out: cannot write {path}: {exc.strerror or exc}") from None


def _stat(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise StoreError(f"out: cannot write {path}: {exc.strerror or exc}") from None


def _refusal(path: Path, status: os.stat_result | None, database: Path) -> str | None:
    """Why `path` must not be written, or None."""
    real = os.path.realpath(path)
    for suffix in ("", *SIDECAR_SUFFIXES):
        db_file = Path(os.path.realpath(database) + suffix)
        if real == str(db_file) or (status is not None and _same_file(status, db_file)):
            what = "the database" if not suffix else f"the {suffix[1:]} file of the database"
            return f"{path} is {what} being exported ({database}); give the bundle another name"
    if status is None:
        return None
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        return f"{path} is a folder; give a file name for the bundle"
    if stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        return f"{path} is a {'block device' if stat.S_ISBLK(mode) else 'socket'}; give a file name for the bundle"
    if not stat.S_ISREG(mode):
        return None  # a FIFO or a character device: written through
    try:
        with open(path, "rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        return f"cannot read {path} to check it is not a database ({exc.strerror or exc})"
    if header == SQLITE_HEADER:
        return f"{path} is an SQLite database; a bundle is JSON: give it another name"
    for suffix in SIDECAR_SUFFIXES:
        if real.endswith(suffix) and _is_sqlite(real[: -len(suffix)]):
            return f"{path} is the {suffix[1:]} file of the SQLite database {real[: -len(suffix)]}; give the bundle another name"
    return None


def _same_file(status: os.stat_result, other: Path) -> bool:
    try:
        theirs = other.stat()
    except OSError:
        return False
    return (status.st_dev, status.st_ino) == (theirs.st_dev, theirs.st_ino)


def _is_sqlite(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False
