"""The store's SQLite schema, as a list of forward migrations.

A new database is built by applying every migration from v1, so the upgrade path that old files
take is the same path every fresh file takes — it cannot rot unnoticed. The version lives in
`PRAGMA user_version`. Migrations only ever move forward; a file from a newer dashbench is refused.
"""

from __future__ import annotations

import json
import sqlite3

# The first released layout: everything a run knows lives in JSON columns.
V1_SQL = """
CREATE TABLE runs (
    run_id      TEXT PRIMARY KEY,
    status      TEXT NOT NULL,
    spec_json   TEXT NOT NULL,
    result_json TEXT,
    error       TEXT,
    created_at  REAL NOT NULL,
    started_at  REAL,
    finished_at REAL,
    pid         INTEGER,
    host        TEXT,
    sweep_id    TEXT,
    label       TEXT
);
CREATE TABLE samples (
    run_id     TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,
    steps      INTEGER NOT NULL,
    duration_s REAL NOT NULL,
    loss       REAL,
    warmup     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, idx)
);
CREATE INDEX runs_created ON runs(created_at);
"""

# Columns lifted out of spec_json / result_json in v2, so that the dashboard's filters and tables
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
    backend = next((v for v in (result.get("backend"), spec.get("backend")) if isinstance(v, str) and v),
                   DEFAULT_BACKEND)
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


# v2 columns of `runs`, in order. The JSON moved to `run_blobs`: a row of `runs` is ~300 bytes,
# so a scan of 100k runs reads a few MiB of pages instead of walking every run's JSON.
RUN_COLUMNS_V2 = ("run_id", "status", "created_at", "started_at", "finished_at", "pid", "host", "sweep_id",
                  "label", "error", *FLAT_COLUMNS)


def _v2(conn: sqlite3.Connection) -> None:
    columns = ",\n    ".join(f"{name} {sql_type}" for name, (sql_type, _s, _k) in FLAT_COLUMNS.items())
    conn.execute(f"""CREATE TABLE runs_v2 (
    run_id      TEXT PRIMARY KEY,
    status      TEXT NOT NULL,
    created_at  REAL NOT NULL,
    started_at  REAL,
    finished_at REAL,
    pid         INTEGER,
    host        TEXT,
    sweep_id    TEXT,
    label       TEXT,
    error       TEXT,
    {columns}
)""")
    conn.execute(
        """CREATE TABLE run_blobs (
            run_id      TEXT PRIMARY KEY REFERENCES runs(run_id) ON DELETE CASCADE,
            spec_json   TEXT NOT NULL,
            result_json TEXT
        )"""
    )
    rows = conn.execute(
        "SELECT run_id, status, created_at, started_at, finished_at, pid, host, sweep_id, label, error,"
        " spec_json, result_json FROM runs"
    ).fetchall()
    marks = ",".join("?" * len(RUN_COLUMNS_V2))
    for *head, spec_json, result_json in rows:
        flat = flat_values(json.loads(spec_json), json.loads(result_json) if result_json else None)
        conn.execute(f"INSERT INTO runs_v2 ({', '.join(RUN_COLUMNS_V2)}) VALUES ({marks})",
                     [*head, *(flat[name] for name in FLAT_COLUMNS)])
        conn.execute("INSERT INTO run_blobs VALUES (?, ?, ?)", (head[0], spec_json, result_json))
    # SQLite's table-rebuild recipe; foreign keys are off (see migrate) so the drop cascades nowhere.
    conn.execute("DROP TABLE runs")
    conn.execute("ALTER TABLE runs_v2 RENAME TO runs")
    conn.execute("CREATE INDEX runs_created ON runs(created_at)")
    # Every filter of the dashboard is an equality on one of these plus an ordering by time.
    for column in ("status", "model", "device", "accelerator", "precision", "batch_size", "sweep_id", "label"):
        conn.execute(f"CREATE INDEX runs_{column} ON runs({column}, created_at)")
    conn.execute("CREATE INDEX runs_host_status ON runs(host, status)")


def _v3(conn: sqlite3.Connection) -> None:
    # Job runner: what the run is doing now, and a cancel that outlives the process that asked.
    conn.execute("ALTER TABLE runs ADD COLUMN phase TEXT")
    conn.execute("ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE runs ADD COLUMN log_path TEXT")
    # The user's edits to the price catalog (dashbench.costs merges them over the shipped rows).
    conn.execute(
        """CREATE TABLE price_overrides (
            key                     TEXT PRIMARY KEY,
            device                  TEXT NOT NULL,
            provider                TEXT,
            unit                    TEXT NOT NULL,
            chips_per_unit          REAL,
            on_demand_usd_per_hour  REAL,
            spot_usd_per_hour       REAL,
            region                  TEXT,
            source                  TEXT,
            as_of                   TEXT,
            unconfirmed             INTEGER NOT NULL DEFAULT 0,
            origin                  TEXT NOT NULL DEFAULT 'override',
            updated_at              REAL NOT NULL
        )"""
    )


def _v4(conn: sqlite3.Connection) -> None:
    # The Keras backend (tensorflow | jax) and its version, filled for the runs already stored.
    for name, sql_type in BACKEND_COLUMNS.items():
        conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {sql_type}")
    rows = conn.execute("SELECT run_id, spec_json, result_json FROM run_blobs").fetchall()
    for run_id, spec_json, result_json in rows:
        values = backend_values(_json_or_none(spec_json), _json_or_none(result_json))
        conn.execute("UPDATE runs SET backend = ?, backend_version = ? WHERE run_id = ?",
                     (values["backend"], values["backend_version"], run_id))
    conn.execute("CREATE INDEX runs_backend ON runs(backend, created_at)")


# v6: `dashbench doctor`'s verdicts, one row per host, device kind and backend checked.
CALIBRATION_COLUMNS = ("created_at", "host", "device", "accelerator", "backend", "versions_json", "peaks_json",
                       "stopwatch_ratio", "verdict", "reasons_json", "detail_json")


def _v6(conn: sqlite3.Connection) -> None:
    conn.execute(
        """CREATE TABLE calibrations (
            id              INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at      REAL NOT NULL,
            host            TEXT NOT NULL,
            device          TEXT NOT NULL,
            accelerator     TEXT,
            backend         TEXT NOT NULL,
            versions_json   TEXT NOT NULL DEFAULT '{}',
            peaks_json      TEXT NOT NULL DEFAULT '{}',
            stopwatch_ratio REAL,
            verdict         TEXT NOT NULL,
            reasons_json    TEXT NOT NULL DEFAULT '[]',
            detail_json     TEXT NOT NULL DEFAULT '{}'
        )"""
    )
    conn.execute("CREATE INDEX calibrations_host ON calibrations(host, device, created_at)")


def _json_or_none(text):
    """Stored JSON, or None for a damaged value: one bad row must not stop the upgrade of the file."""
    try:
        return json.loads(text) if text else None
    except (TypeError, ValueError):
        return None


def _v1(conn: sqlite3.Connection) -> None:
    # Not executescript(): it would COMMIT the migration's transaction half-way.
    for statement in V1_SQL.split(";"):
        if statement.strip():
            conn.execute(statement)


def _v5(conn: sqlite3.Connection) -> None:
    # The shape overrides (image_size, seq_len, width), filled for the runs already stored.
    for name, sql_type in SHAPE_COLUMNS.items():
        conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {sql_type}")
    rows = conn.execute("SELECT run_id, spec_json FROM run_blobs").fetchall()
    for run_id, spec_json in rows:
        values = shape_values(_json_or_none(spec_json))
        if any(v is not None for v in values.values()):
            conn.execute("UPDATE runs SET image_size = ?, seq_len = ?, width = ? WHERE run_id = ?",
                         (values["image_size"], values["seq_len"], values["width"], run_id))


def _v7(conn: sqlite3.Connection) -> None:
    # The host's CPU count, filled for the runs already stored (from their result's environment).
    for name, sql_type in HOST_COLUMNS.items():
        conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {sql_type}")
    rows = conn.execute("SELECT run_id, result_json FROM run_blobs WHERE result_json IS NOT NULL").fetchall()
    for run_id, result_json in rows:
        cpus = host_values(_json_or_none(result_json))["host_cpus"]
        if cpus is not None:
            conn.execute("UPDATE runs SET host_cpus = ? WHERE run_id = ?", (cpus, run_id))


def _v8(conn: sqlite3.Connection) -> None:
    # The first CPU probe of a host on a backend, per dtype: the provisional peak that host's CPU runs
    # share until `doctor` calibrates it (one probe per run made early MFUs incomparable).
    conn.execute(
        """CREATE TABLE first_cpu_probes (
            host       TEXT NOT NULL,
            backend    TEXT NOT NULL,
            dtype      TEXT NOT NULL,
            tflops     REAL NOT NULL,
            created_at REAL NOT NULL,
            run_id     TEXT,
            PRIMARY KEY (host, backend, dtype)
        )"""
    )


def _v9(conn: sqlite3.Connection) -> None:
    # When a running run last said it is alive (its samples, its phase, its host's job queue): a run on
    # another host whose heartbeat lapsed is presumed dead, so its claim is given up, never run twice.
    conn.execute("ALTER TABLE runs ADD COLUMN heartbeat_at REAL")


# MIGRATIONS[n - 1] takes a database from version n - 1 to version n.
MIGRATIONS = [_v1, _v2, _v3, _v4, _v5, _v6, _v7, _v8, _v9]
SCHEMA_VERSION = len(MIGRATIONS)

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


# -- PostgreSQL: created at the head in one transaction (its history starts at v9) ------------------

# Text compares byte by byte ("C"), as SQLite's does: the same order, and a run id's prefix is a range.
_PG_TYPES = {"TEXT": 'TEXT COLLATE "C"', "REAL": "DOUBLE PRECISION", "INTEGER": "BIGINT"}


def postgres_ddl() -> list[str]:
    """The statements that make an empty PostgreSQL database a store at SCHEMA_VERSION: the same tables,
    columns and indexes as an SQLite file at that version, with PostgreSQL's types (REAL is 4 bytes
    there: times and figures are DOUBLE PRECISION)."""
    flat = [(name, sql_type) for name, (sql_type, _s, _k) in FLAT_COLUMNS.items()]
    later = [("phase", "TEXT"), *BACKEND_COLUMNS.items(), *SHAPE_COLUMNS.items(), *HOST_COLUMNS.items(),
             ("log_path", "TEXT"), ("heartbeat_at", "REAL")]
    columns = ",\n    ".join(f"{name} {_PG_TYPES[sql_type]}" for name, sql_type in flat + later)
    statements = [
        f"""CREATE TABLE runs (
    run_id      TEXT COLLATE "C" PRIMARY KEY,
    status      TEXT COLLATE "C" NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL,
    started_at  DOUBLE PRECISION,
    finished_at DOUBLE PRECISION,
    pid         BIGINT,
    host        TEXT COLLATE "C",
    sweep_id    TEXT COLLATE "C",
    label       TEXT COLLATE "C",
    error       TEXT COLLATE "C",
    cancel_requested BIGINT NOT NULL DEFAULT 0,
    {columns}
)""",
        """CREATE TABLE run_blobs (
    run_id      TEXT COLLATE "C" PRIMARY KEY REFERENCES runs(run_id) ON DELETE CASCADE,
    spec_json   TEXT COLLATE "C" NOT NULL,
    result_json TEXT COLLATE "C"
)""",
        # idx and steps stay 4-byte: sum(steps) is then a BIGINT (a Python int), not a NUMERIC (a Decimal).
        """CREATE TABLE samples (
    run_id     TEXT COLLATE "C" NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,
    steps      INTEGER NOT NULL,
    duration_s DOUBLE PRECISION NOT NULL,
    loss       DOUBLE PRECISION,
    warmup     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, idx)
)""",
        "CREATE INDEX runs_created ON runs(created_at)",
        *(f"CREATE INDEX runs_{c} ON runs({c}, created_at)"
          for c in ("status", "model", "device", "accelerator", "precision", "batch_size", "sweep_id", "label",
                    "backend")),
        "CREATE INDEX runs_host_status ON runs(host, status)",
        """CREATE TABLE price_overrides (
    key                     TEXT COLLATE "C" PRIMARY KEY,
    device                  TEXT COLLATE "C" NOT NULL,
    provider                TEXT COLLATE "C",
    unit                    TEXT COLLATE "C" NOT NULL,
    chips_per_unit          DOUBLE PRECISION,
    on_demand_usd_per_hour  DOUBLE PRECISION,
    spot_usd_per_hour       DOUBLE PRECISION,
    region                  TEXT COLLATE "C",
    source                  TEXT COLLATE "C",
    as_of                   TEXT COLLATE "C",
    unconfirmed             INTEGER NOT NULL DEFAULT 0,
    origin                  TEXT COLLATE "C" NOT NULL DEFAULT 'override',
    updated_at              DOUBLE PRECISION NOT NULL
)""",
        """CREATE TABLE calibrations (
    id              BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    created_at      DOUBLE PRECISION NOT NULL,
    host            TEXT COLLATE "C" NOT NULL,
    device          TEXT COLLATE "C" NOT NULL,
    accelerator     TEXT COLLATE "C",
    backend         TEXT COLLATE "C" NOT NULL,
    versions_json   TEXT COLLATE "C" NOT NULL DEFAULT '{}',
    peaks_json      TEXT COLLATE "C" NOT NULL DEFAULT '{}',
    stopwatch_ratio DOUBLE PRECISION,
    verdict         TEXT COLLATE "C" NOT NULL,
    reasons_json    TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    detail_json     TEXT COLLATE "C" NOT NULL DEFAULT '{}'
)""",
        "CREATE INDEX calibrations_host ON calibrations(host, device, created_at)",
        """CREATE TABLE first_cpu_probes (
    host       TEXT COLLATE "C" NOT NULL,
    backend    TEXT COLLATE "C" NOT NULL,
    dtype      TEXT COLLATE "C" NOT NULL,
    tflops     DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    run_id     TEXT COLLATE "C",
    PRIMARY KEY (host, backend, dtype)
)""",
    ]
    return statements


def migrate(conn: sqlite3.Connection, from_version: int) -> None:
    """Apply every migration after `from_version` in ONE transaction: a reader (or a crash) sees
    the old version or the new one, never a half-built file. Foreign keys are off meanwhile (a
    table rebuild drops and renames tables) and checked before the commit."""
    conn.execute("PRAGMA foreign_keys = OFF")  # only takes effect outside a transaction
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # A second process may have upgraded the file while we waited for the lock.
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            for version in range(max(current, from_version) + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[version - 1](conn)
            broken = conn.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise sqlite3.IntegrityError(f"migration broke references: {broken[:3]}")
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
