"""The store's layout: the runs' flat columns and how they are read from a run's spec and result, the
price and calibration columns, and the schema's version.

The schema's steps are alembic revisions (dashbench/store/migrations/versions/, run by migrate.py); the
version is the newest revision's number, kept in `PRAGMA user_version` on SQLite and in `dashbench_schema`
on PostgreSQL, where every dashbench reads it: a store newer than the code is refused.
"""

from __future__ import annotations

import json

from dashbench.store import migrations

# Columns lifted out of spec_json / result_json in v2 (revision 0002), so that the dashboard's filters and tables
# read plain indexed columns instead of parsing JSON for 100k rows. name -> (SQL type, source, key)
FLAT_COLUMNS = {
    "model": ("TEXT", "spec", "model"),
    "device": ("TEXT", "spec", "device"),  # replaced by the resolved kind once a result exists
    "accelerator": ("TEXT", "result", "accelerator"),
    "accelerator_count": ("INTEGER", "result", "accelerator_count"),
    "replicas": ("INTEGER", "result", "replicas"),
    "batch_size": ("INTEGER", "spec", "batch_size"),
    "precision": ("TEXT", "spec", "precision"),
    "xla": ("INTEGER", "spec", "xla"),
    "data": ("TEXT", "spec", "data"),
    "unit": ("TEXT", "result", "unit"),
    "steps": ("INTEGER", "spec", "steps"),
    "examples_per_sec": ("REAL", "result", "examples_per_sec"),
    "examples_per_sec_ci95_lo": ("REAL", "result", None),
    "examples_per_sec_ci95_hi": ("REAL", "result", None),
    "step_time_median_s": ("REAL", "result", "step_time_median_s"),
    "step_time_p10_s": ("REAL", "result", "step_time_p10_s"),
    "step_time_p90_s": ("REAL", "result", "step_time_p90_s"),
    "step_time_std_s": ("REAL", "result", "step_time_std_s"),
    "n_samples": ("INTEGER", "result", "samples"),
    "compile_s": ("REAL", "result", "compile_s"),
    "achieved_tflops": ("REAL", "result", "achieved_tflops"),
    "peak_tflops": ("REAL", "result", "peak_tflops"),
    "mfu": ("REAL", "result", "mfu"),
    "flags_json": ("TEXT", "result", "flags"),
}


# Columns added in v4: the Keras backend that ran it (a filter, like the columns above) and that
# framework's version. name -> SQL type.
BACKEND_COLUMNS = {"backend": "TEXT", "backend_version": "TEXT"}
DEFAULT_BACKEND = "tensorflow"  # what every run stored before backends existed ran on


def backend_values(spec: dict | None, result: dict | None) -> dict:
    """backend and backend_version of one run: the result's (what really ran), else the spec's
    backend (a queued run), else tensorflow; a TensorFlow result from before backends existed
    names its version in env["tensorflow"]."""
    spec = spec if isinstance(spec, dict) else {}
    result = result if isinstance(result, dict) else {}
    backend = next(
        (v for v in (result.get("backend"), spec.get("backend")) if isinstance(v, str) and v), DEFAULT_BACKEND
    )
    version = result.get("backend_version")
    if not (isinstance(version, str) and version):
        env = result.get("env") if isinstance(result.get("env"), dict) else {}
        version = env.get(backend) if backend == DEFAULT_BACKEND else None
        version = version if isinstance(version, str) and version else None
    return {"backend": backend, "backend_version": version}


# Columns added in v5: the spec's shape overrides (NULL: the workload's full-size default), so that a
# quick-shape run is never listed, labelled or compared as a full-size one. name -> SQL type.
SHAPE_COLUMNS = {"image_size": "INTEGER", "seq_len": "INTEGER", "width": "INTEGER"}


def shape_values(spec: dict | None) -> dict:
    """The shape overrides of one run's spec (None where the spec keeps the full-size default)."""
    spec = spec if isinstance(spec, dict) else {}
    out = {}
    for name in SHAPE_COLUMNS:
        value = spec.get(name)
        out[name] = value if isinstance(value, int) and not isinstance(value, bool) else None
    return out


# v7: the logical CPUs of the host a run ran on (its result's env.cpu_count): a CPU run is priced per
# vCPU-hour, as the cloud VM it ran on is. name -> SQL type.
HOST_COLUMNS = {"host_cpus": "INTEGER"}


def host_values(result: dict | None) -> dict:
    env = (result or {}).get("env")
    cpus = env.get("cpu_count") if isinstance(env, dict) else None
    ok = isinstance(cpus, int) and not isinstance(cpus, bool) and 0 < cpus < 2**31
    return {"host_cpus": cpus if ok else None}


def flat_values(spec: dict, result: dict | None) -> dict:
    """The flat columns (v2's FLAT_COLUMNS and v4's BACKEND_COLUMNS) for one run, from its spec and
    (maybe absent) result."""
    result = result or {}
    values = {}
    for column, (_type, source, key) in FLAT_COLUMNS.items():
        if key is None:
            continue
        value = (spec if source == "spec" else result).get(key)
        values[column] = value
    if result.get("device"):
        values["device"] = result["device"]
    if values.get("replicas") is None:
        values["replicas"] = spec.get("replicas")
    if result.get("global_batch_size") is not None:
        values["batch_size"] = result["global_batch_size"]
    ci = result.get("examples_per_sec_ci95") or [None, None]
    values["examples_per_sec_ci95_lo"], values["examples_per_sec_ci95_hi"] = (list(ci) + [None, None])[:2]
    if result.get("xla") is not None:  # what ran: JAX and TPU runs compile with XLA whatever the spec said
        values["xla"] = result["xla"]
    values["xla"] = None if values.get("xla") is None else int(bool(values["xla"]))
    values["flags_json"] = json.dumps(list(result.get("flags") or []))
    values.update(backend_values(spec, result))
    values.update(shape_values(spec))
    values.update(host_values(result))
    return values


# v6: `dashbench doctor`'s verdicts, one row per host, device kind and backend checked.
CALIBRATION_COLUMNS = (
    "created_at",
    "host",
    "device",
    "accelerator",
    "backend",
    "versions_json",
    "peaks_json",
    "stopwatch_ratio",
    "verdict",
    "reasons_json",
    "detail_json",
)


def json_or_none(text):
    """Stored JSON, or None for a damaged value: one bad row must not stop the upgrade of the file."""
    try:
        return json.loads(text) if text else None
    except (TypeError, ValueError):
        return None


# The schema's version: the newest revision's number (read from the file names, so opening a store
# never imports alembic; migrate.py runs the revisions when a store is behind).
SCHEMA_VERSION = migrations.head_number()

PRICE_COLUMNS = (
    "key",
    "device",
    "provider",
    "unit",
    "chips_per_unit",
    "on_demand_usd_per_hour",
    "spot_usd_per_hour",
    "region",
    "source",
    "as_of",
    "unconfirmed",
    "origin",
)
