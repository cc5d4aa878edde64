"""Export bundles: a self-describing JSON file that carries runs (with their samples) between machines.

A bundle names its format and schema version, where it came from, and what each sample column
means, so it can be read without dashbench. Import merges: a run already present (same run id) is
kept once; a bundle that is damaged, foreign or from a newer dashbench is refused with a message
naming the file and the fault, and nothing from any of the files is written (one transaction).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import sys
from pathlib import Path
from typing import Iterable

from dashbench import __version__

from dashbench.store import schema
from dashbench.store.queries import SAMPLE_COLUMNS, where_clause
from dashbench.spec import RunSpec, SpecError
from dashbench.store.database import (
    STATUSES,
    BundleError,
    StoreError,
    Store,
    insert_run,
    iso,
    this_host,
)

FORMAT = "dashbench-bundle"
RUN_FIELDS = ("run_id", "status", "spec", "result", "error", "created_at", "started_at", "finished_at",
              "pid", "host", "sweep_id", "label", "samples")
REQUIRED_RUN_FIELDS = ("run_id", "status", "spec", "created_at")


def export_bundle(store: Store, path: str | os.PathLike, **filters) -> int:
    """Write the runs matching `filters` (as Store.runs) to `path`. Returns how many."""
    where, params, limit = where_clause(filters)
    sql = ("SELECT run_id, status, spec_json, result_json, error, created_at, started_at, finished_at, pid, host,"
           f" sweep_id, label FROM runs JOIN run_blobs USING (run_id){where} ORDER BY created_at, run_id")
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    rows = store._read(sql, params)
    samples: dict[str, list] = {row[0]: [] for row in rows}
    for chunk_start in range(0, len(rows), 500):
        ids = [row[0] for row in rows[chunk_start:chunk_start + 500]]
        for run_id, idx, steps, duration_s, loss, warmup in store._read(
            f"SELECT run_id, idx, steps, duration_s, loss, warmup FROM samples WHERE run_id IN"
            f" ({','.join('?' * len(ids))}) ORDER BY run_id, idx", ids
        ):
            samples[run_id].append([idx, steps, duration_s, loss, bool(warmup)])
    runs = []
    for run_id, status, spec_json, result_json, error, created, started, finished, pid, host, sweep_id, label in rows:
        runs.append({
            "run_id": run_id, "status": status, "spec": json.loads(spec_json),
            "result": json.loads(result_json) if result_json else None, "error": error,
            "created_at": iso(created), "started_at": iso(started), "finished_at": iso(finished),
            "pid": pid, "host": host, "sweep_id": sweep_id, "label": label, "samples": samples[run_id],
        })
    bundle = {
        "format": FORMAT,
        "schema_version": schema.SCHEMA_VERSION,
        "exported_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
        "environment": {
            "host": this_host(), "dashbench_version": __version__, "python": sys.version.split()[0],
            "platform": platform.platform(), "source_db": str(store.path),
        },
        "filters": {k: (list(v) if isinstance(v, (set, tuple, frozenset)) else v) for k, v in filters.items()},
        "sample_columns": list(SAMPLE_COLUMNS),
        "time_format": "ISO 8601, UTC",
        "runs": runs,
    }
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    # Written aside and renamed, so a crash never leaves a half bundle under the real name.
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(bundle, fh, default=str)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StoreError(f"out: cannot write {path}: {exc.strerror or exc}") from None
    return len(runs)


def import_bundles(store: Store, paths: Iterable[str | os.PathLike]) -> dict:
    """Merge bundles into `store`. Every file is read and checked before anything is written."""
    paths = [Path(p) for p in paths]
    parsed = [(path, read_bundle(path)) for path in paths]
    counts = {"files": len(paths), "runs_added": 0, "runs_skipped": 0, "samples_added": 0}
    with store._write("import bundles") as conn:
        seen = set()
        for _path, runs in parsed:
            for run in runs:
                exists = conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run["row"]["run_id"],)).fetchone()
                if exists or run["row"]["run_id"] in seen:
                    counts["runs_skipped"] += 1
                    continue
                seen.add(run["row"]["run_id"])
                insert_run(conn, run["row"])
                conn.executemany(
                    "INSERT INTO samples (run_id, idx, steps, duration_s, loss, warmup) VALUES (?,?,?,?,?,?)",
                    run["samples"],
                )
                counts["runs_added"] += 1
                counts["samples_added"] += len(run["samples"])
    return counts


def read_bundle(path: Path) -> list[dict]:
    """Parse and check one bundle; returns rows ready to insert. Raises BundleError naming the fault."""
    def fail(message: str) -> BundleError:
        return BundleError(f"{path}: {message}; nothing was imported")

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot read the file ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise fail("not a text file, so not a dashbench bundle") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"not valid JSON (truncated or damaged?): {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise fail(f"not a dashbench bundle (no \"format\": \"{FORMAT}\" field)")
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise fail(f"schema_version: must be a whole number >= 1, got {version!r}")
    if version > schema.SCHEMA_VERSION:
        raise fail(f"schema_version: the bundle has schema v{version} but this dashbench reads up to "
                   f"v{schema.SCHEMA_VERSION}; upgrade dashbench to import it")
    columns = data.get("sample_columns", list(SAMPLE_COLUMNS))
    if list(columns) != list(SAMPLE_COLUMNS):
        raise fail(f"sample_columns: expected {list(SAMPLE_COLUMNS)}, got {columns!r}")
    runs = data.get("runs")
    if not isinstance(runs, list):
        raise fail("runs: missing, or not a list")
    return [_check_run(run, number, fail) for number, run in enumerate(runs, start=1)]


def _check_run(run, number: int, fail) -> dict:
    if not isinstance(run, dict):
        raise fail(f"run #{number}: not an object")
    where = f"run #{number} ({run.get('run_id', 'no id')})"
    missing = [name for name in REQUIRED_RUN_FIELDS if run.get(name) in (None, "")]
    if missing:
        raise fail(f"{where}: missing field {missing[0]!r}")
    unknown = sorted(set(run) - set(RUN_FIELDS))
    if unknown:
        raise fail(f"{where}: unknown field {unknown[0]!r}")
    if not isinstance(run["run_id"], str):
        raise fail(f"{where}: run_id: must be text")
    status = run["status"]
    if status not in STATUSES:
        raise fail(f"{where}: status: unknown status {status!r}")
    if not isinstance(run["spec"], dict):
        raise fail(f"{where}: spec: must be an object")
    try:
        spec = RunSpec.from_dict(run["spec"]).to_dict()
    except (SpecError, TypeError) as exc:
        raise fail(f"{where}: spec: {exc}") from None
    result = run.get("result")
    if result is not None and not isinstance(result, dict):
        raise fail(f"{where}: result: must be an object or null")
    times = {}
    for name in ("created_at", "started_at", "finished_at"):
        value = run.get(name)
        if value is None:
            times[name] = None
            continue
        try:
            moment = _dt.datetime.fromisoformat(value)
        except (TypeError, ValueError):
            raise fail(f"{where}: {name}: not an ISO 8601 time: {value!r}") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=_dt.timezone.utc)
        times[name] = moment.timestamp()
    error = run.get("error")
    if status in ("queued", "running"):
        # It will never finish here, and a queued row would be started by this machine's job runner.
        status = "interrupted"
        error = error or f"exported while {run['status']} on {run.get('host') or 'another host'}"
    samples = []
    for i, sample in enumerate(run.get("samples") or []):
        if not isinstance(sample, list) or len(sample) != len(SAMPLE_COLUMNS):
            raise fail(f"{where}: samples[{i}]: expected a list of {len(SAMPLE_COLUMNS)} values {list(SAMPLE_COLUMNS)}")
        idx, steps, duration_s, loss, warmup = sample
        try:
            samples.append((run["run_id"], int(idx), int(steps), float(duration_s),
                            None if loss is None else float(loss), int(bool(warmup))))
        except (TypeError, ValueError):
            raise fail(f"{where}: samples[{i}]: not numbers: {sample!r}") from None
    row = {
        "run_id": run["run_id"], "status": status, "spec_json": json.dumps(spec),
        "result_json": json.dumps(result) if result is not None else None, "error": error,
        **times, "pid": run.get("pid"), "host": run.get("host"), "sweep_id": run.get("sweep_id"),
        "label": run.get("label", spec.get("label")), **schema.flat_values(spec, result),
    }
    return {"row": row, "samples": samples}
