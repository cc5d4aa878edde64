"""Export bundles: a self-describing JSON file that carries runs (with their samples) between machines.

A bundle names its format and schema version, where it came from, and what each sample column
means, so it can be read without dashbench. Import merges: a run already present (same run id) is
kept once; a bundle that is damaged, foreign or from a newer dashbench is refused with a message
naming the file and the fault, and nothing from any of the files is written (one transaction).
Uses only the Store's public API: the database module knows nothing of bundles.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sqlite3
import stat
import sys
from pathlib import Path
from typing import Iterable

from dashbench import __version__
from dashbench.core.errors import one_line
from dashbench.store import database, export_target, schema, validate
from dashbench.store.database import BundleError, Store, StoreError, this_host
from dashbench.store.queries import SAMPLE_COLUMNS
from dashbench.store.states import STATUSES

FORMAT = "dashbench-bundle"
# A bundled run: the fields of a stored run, and its samples.
RUN_FIELDS = (*database.RUN_FIELDS, "samples")
REQUIRED_RUN_FIELDS = ("run_id", "status", "spec", "created_at")
# A bundle is read whole into memory and checked before anything is written, so its size is
# bounded: 256 MiB holds millions of samples, far past what one store's Compare page can show.
MAX_BUNDLE_BYTES = 256 * 2**20
# A bundle nests about 8 deep (runs, a run, its result, the result's env); anything near Python's
# own recursion limit is not one, and must be refused before it can raise RecursionError anywhere.
MAX_NESTING = 64


def export_bundle(store: Store, path: str | os.PathLike, replace: bool = False, **filters) -> int:
    """Write the runs matching `filters` (as Store.runs) to `path` ("-": stdout); an existing file only
    with `replace`. Returns how many."""
    runs = [{name: run[name] for name in RUN_FIELDS} for run in store.export_rows(**filters)]
    bundle = {
        "format": FORMAT,
        "schema_version": schema.SCHEMA_VERSION,
        "exported_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "environment": {
            "host": this_host(),
            "dashbench_version": __version__,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "source_db": str(store.path),
        },
        "filters": {k: (list(v) if isinstance(v, (set, tuple, frozenset)) else v) for k, v in filters.items()},
        "sample_columns": list(SAMPLE_COLUMNS),
        "time_format": "ISO 8601, UTC",
        "runs": runs,
    }
    # Never over the database or another SQLite file; through a FIFO or a device; "-" is stdout.
    export_target.write_bundle(path, lambda fh: json.dump(bundle, fh, default=str), store.path, replace=replace)
    return len(runs)


def import_bundles(store: Store, paths: Iterable[str | os.PathLike]) -> dict:
    """Merge bundles into `store`. Every file is read and checked before anything is written."""
    paths = [Path(p) for p in paths]
    runs = [run for path in paths for run in read_bundle(path)]
    try:
        counts = store.import_rows(runs)
    except sqlite3.Error as exc:
        # A full disk or a file-size limit (SQLITE_FULL, SQLITE_IOERR) mid-transaction: rolled back.
        raise StoreError(
            f"cannot import runs into {store.path}: {one_line(exc, None)} (a full disk or a "
            f"file-size limit?); nothing was imported"
        ) from None
    return {"files": len(paths), **counts}


def _read_text(path: Path, fail) -> str:
    """The file's text: a regular file of at most MAX_BUNDLE_BYTES, else BundleError. A FIFO with
    no writer would block the open for ever, /dev/zero would fill memory: neither is opened."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise fail(f"cannot read the file ({exc.strerror or exc})") from None
    _check_kind(info, fail)
    try:
        # O_NONBLOCK: a FIFO put in its place since the stat still opens at once (then refused).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise fail(f"cannot read the file ({exc.strerror or exc})") from None
    with open(fd, "rb") as fh:
        _check_kind(os.fstat(fd), fail)
        try:
            data = fh.read(MAX_BUNDLE_BYTES + 1)
        except OSError as exc:
            raise fail(f"cannot read the file ({exc.strerror or exc})") from None
    if len(data) > MAX_BUNDLE_BYTES:
        raise fail(_too_large())
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise fail("not a text file, so not a dashbench bundle") from None


def _check_kind(info: os.stat_result, fail) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a folder"
            if stat.S_ISDIR(info.st_mode)
            else "a FIFO (named pipe)"
            if stat.S_ISFIFO(info.st_mode)
            else "a device"
            if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
            else "a socket"
            if stat.S_ISSOCK(info.st_mode)
            else "not a regular file"
        )
        raise fail(f"{kind}: import reads regular files only")
    if info.st_size > MAX_BUNDLE_BYTES:
        raise fail(_too_large())


def _too_large() -> str:
    bound = f"{MAX_BUNDLE_BYTES // 2**20} MiB" if MAX_BUNDLE_BYTES % 2**20 == 0 else f"{MAX_BUNDLE_BYTES} bytes"
    return f"larger than {bound}, the most one bundle may hold; export fewer runs per file"


def _too_deep(data) -> bool:
    """Nested past MAX_NESTING? Walked without recursion; samples are skipped (each is checked
    to be a flat list of numbers)."""
    pending = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        if depth > MAX_NESTING:
            return True
        if isinstance(value, dict):
            inner = (v for k, v in value.items() if not (k == "samples" and depth == 3))
        elif isinstance(value, list):
            inner = iter(value)
        else:
            continue
        pending.extend((v, depth + 1) for v in inner if isinstance(v, (dict, list)))
    return False


class _HugeInt:
    """An integer literal too long for int(): kept as its length, so the field holding it can be named."""

    def __init__(self, text: str):
        self.digits = len(text.lstrip("-"))


def _huge_integer(text: str) -> str:
    """Why json.loads refused `text` with a ValueError (not a JSONDecodeError): the field whose integer has
    more digits than Python converts, found by parsing again with such integers kept aside."""
    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0

    def parse_int(literal: str):
        return _HugeInt(literal) if limit and len(literal.lstrip("-")) > limit else int(literal)

    data = json.loads(text, parse_int=parse_int)
    pending: list[tuple[object, tuple]] = [(data, ())]
    while pending:
        value, path = pending.pop()
        if isinstance(value, _HugeInt):
            return (
                f"{_field_text(data, path)}: a whole number of {value.digits} digits, past every field's "
                f"bound (at most {len(str(validate.INT_LIMIT - 1))} digits)"
            )
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        pending.extend((inner, (*path, key)) for key, inner in items)
    return "a number this Python cannot read"


def _field_text(data, path: tuple) -> str:
    """`path` in a bundle as import's messages name a field: run #N (id): result.losses[3]."""

    def dotted(keys) -> str:
        text = ""
        for key in keys:
            text += f"[{key}]" if isinstance(key, int) else (f".{key}" if text else str(key))
        return text or "(the whole file)"

    if len(path) >= 2 and path[0] == "runs" and isinstance(path[1], int):
        run = data["runs"][path[1]]
        run_id = run.get("run_id") if isinstance(run, dict) else None
        sane = isinstance(run_id, str) and validate.RUN_ID.fullmatch(run_id)
        return f"run #{path[1] + 1} ({run_id if sane else 'no id'}): {dotted(path[2:]) if path[2:] else 'the run'}"
    return dotted(path)


def read_bundle(path: Path) -> list[dict]:
    """Parse and check one bundle; returns runs ready for Store.import_rows. Raises BundleError naming the fault."""

    def fail(message: str) -> BundleError:
        return BundleError(f"{path}: {message}; nothing was imported")

    text = _read_text(path, fail)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(
            f"not valid JSON (truncated or damaged?): {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise fail(f"nested more than {MAX_NESTING} levels deep, which no dashbench bundle is") from None
    except ValueError:  # an integer past Python's digit limit (sys.get_int_max_str_digits)
        raise fail(_huge_integer(text)) from None
    if _too_deep(data):
        raise fail(f"nested more than {MAX_NESTING} levels deep, which no dashbench bundle is")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise fail(f'not a dashbench bundle (no "format": "{FORMAT}" field)')
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise fail(f"schema_version: must be a whole number >= 1, got {version!r}")
    if version > schema.SCHEMA_VERSION:
        raise fail(
            f"schema_version: the bundle has schema v{version} but this dashbench reads up to "
            f"v{schema.SCHEMA_VERSION}; upgrade dashbench to import it"
        )
    columns = data.get("sample_columns", list(SAMPLE_COLUMNS))
    if list(columns) != list(SAMPLE_COLUMNS):
        raise fail(f"sample_columns: expected {list(SAMPLE_COLUMNS)}, got {columns!r}")
    runs = data.get("runs")
    if not isinstance(runs, list):
        raise fail("runs: missing, or not a list")
    checked = [check_run(run, number, fail) for number, run in enumerate(runs, start=1)]
    first: dict[str, int] = {}
    for number, run in enumerate(checked, start=1):
        seen = first.setdefault(run["run_id"], number)
        if seen != number:
            raise fail(f"run #{number} ({run['run_id']}): run_id: appears twice in this file (run #{seen} has it too)")
    return checked


def check_run(run, number: int, fail) -> dict:
    """One run as a bundle carries it (`number`: its place, for the message), checked field by field as
    import checks it; returns it in Store.import_rows' form (a run still going as interrupted, its flags
    recomputed). A bad field raises fail("run #N (id): field: why")."""
    if not isinstance(run, dict):
        raise fail(f"run #{number}: not an object")
    run_id = run.get("run_id")
    # A run id is quoted only once it is known to be one line of plain characters.
    sane = isinstance(run_id, str) and validate.RUN_ID.fullmatch(run_id)
    where = f"run #{number} ({run_id if sane else 'no id' if run_id is None else 'bad id'})"
    missing = [name for name in REQUIRED_RUN_FIELDS if run.get(name) is None or run.get(name) == ""]
    if missing:
        raise fail(f"{where}: missing field {missing[0]!r}")
    unknown = sorted(set(run) - set(RUN_FIELDS))
    if unknown:
        raise fail(f"{where}: unknown field {unknown[0]!r}")
    status = run["status"]
    if not isinstance(status, str) or status not in STATUSES:
        raise fail(f"{where}: status: unknown status {status!r}")
    # Every field as the engine and the store write it, so an accepted run can always be read back.
    try:
        validate.check_run_fields(run)
        spec = validate.check_spec(run["spec"])
        validate.check_result(run.get("result"))
        validate.check_agreement(status, spec, run.get("result"))
        times = validate.check_times(run)
        samples = validate.check_samples(run.get("samples"), SAMPLE_COLUMNS)
    except validate.InvalidField as exc:
        raise fail(f"{where}: {exc}") from None
    error = run.get("error")
    if status in ("queued", "running"):
        # It will never finish here, and a queued row would be started by this machine's job runner.
        status = "interrupted"
        error = error or f"exported while {run['status']} on {run.get('host') or 'another host'}"
    result = run.get("result")
    if result is not None and validate.implied_flags(result) != (result.get("flags") or []):
        result = {**result, "flags": validate.implied_flags(result)}
    return {
        "run_id": run["run_id"],
        "status": status,
        "spec": spec,
        "result": result,
        "error": error,
        **times,
        "pid": run.get("pid"),
        "host": run.get("host"),
        "sweep_id": run.get("sweep_id"),
        "label": run.get("label", spec.get("label")),
        "samples": samples,
    }
