"""Export bundles: a self-describing JSON file that carries runs (with their samples) between machines.

A bundle names its format and schema version, where it came from, and what each sample column
means, so it can be read without dashbench. Import merges: a run already present (same run id) is
kept once; a bundle that is damaged, foreign or from a newer dashbench is refused with a message
naming the file and the fault, and nothing from any of the files is written (one transaction).
Uses only the Store's public API: the database module knows nothing of bundles.
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

from dashbench.store import database, schema
from dashbench.store.queries import SAMPLE_COLUMNS
from dashbench.store.states import STATUSES
from dashbench.spec import RunSpec, SpecError
from dashbench.store.database import BundleError, StoreError, Store, this_host

FORMAT = "dashbench-bundle"
# A bundled run: the fields of a stored run, and its samples.
RUN_FIELDS = (*database.RUN_FIELDS, "samples")
REQUIRED_RUN_FIELDS = ("run_id", "status", "spec", "created_at")


def export_bundle(store: Store, path: str | os.PathLike, **filters) -> int:
    """Write the runs matching `filters` (as Store.runs) to `path`. Returns how many."""
    runs = [{name: run[name] for name in RUN_FIELDS} for run in store.export_rows(**filters)]
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
    runs = [run for path in paths for run in read_bundle(path)]
    return {"files": len(paths), **store.import_rows(runs)}


def read_bundle(path: Path) -> list[dict]:
    """Parse and check one bundle; returns runs ready for Store.import_rows. Raises BundleError naming the fault."""
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
            samples.append([int(idx), int(steps), float(duration_s), None if loss is None else float(loss),
                            bool(warmup)])
        except (TypeError, ValueError):
            raise fail(f"{where}: samples[{i}]: not numbers: {sample!r}") from None
    return {
        "run_id": run["run_id"], "status": status, "spec": spec, "result": result, "error": error, **times,
        "pid": run.get("pid"), "host": run.get("host"), "sweep_id": run.get("sweep_id"),
        "label": run.get("label", spec.get("label")), "samples": samples,
    }
