"""v2: the runs' figures lifted out of their JSON into plain indexed columns; the JSON moved to run_blobs.

The dashboard's filters and tables read these columns instead of parsing JSON for 100k rows, and a row
of `runs` is ~300 bytes, so a scan of 100k runs reads a few MiB of pages instead of every run's JSON.
"""

import json

from dashbench.store.migrations import execute, execute_many, on_sqlite, rows
from dashbench.store.schema import flat_values

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# The columns as v2 made them (frozen: later columns are later revisions' to add).
V2_FLAT = (("model", "TEXT"), ("device", "TEXT"), ("accelerator", "TEXT"), ("accelerator_count", "INTEGER"),
           ("replicas", "INTEGER"), ("batch_size", "INTEGER"), ("precision", "TEXT"), ("xla", "INTEGER"),
           ("data", "TEXT"), ("unit", "TEXT"), ("steps", "INTEGER"), ("examples_per_sec", "REAL"),
           ("examples_per_sec_ci95_lo", "REAL"), ("examples_per_sec_ci95_hi", "REAL"),
           ("step_time_median_s", "REAL"), ("step_time_p10_s", "REAL"), ("step_time_p90_s", "REAL"),
           ("step_time_std_s", "REAL"), ("n_samples", "INTEGER"), ("compile_s", "REAL"),
           ("achieved_tflops", "REAL"), ("peak_tflops", "REAL"), ("mfu", "REAL"), ("flags_json", "TEXT"))
HEAD = ("run_id", "status", "created_at", "started_at", "finished_at", "pid", "host", "sweep_id", "label", "error")
INDEXED = ("status", "model", "device", "accelerator", "precision", "batch_size", "sweep_id", "label")


def upgrade() -> None:
    if not on_sqlite():
        return
    columns = ",\n    ".join(f"{name} {sql_type}" for name, sql_type in V2_FLAT)
    execute(f"""CREATE TABLE runs_v2 (
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
)""", """CREATE TABLE run_blobs (
            run_id      TEXT PRIMARY KEY REFERENCES runs(run_id) ON DELETE CASCADE,
            spec_json   TEXT NOT NULL,
            result_json TEXT
        )""")
    old = rows(f"SELECT {', '.join(HEAD)}, spec_json, result_json FROM runs")
    names = HEAD + tuple(name for name, _type in V2_FLAT)
    runs, blobs = [], []
    for *head, spec_json, result_json in old:
        flat = flat_values(json.loads(spec_json), json.loads(result_json) if result_json else None)
        runs.append((*head, *(flat[name] for name, _type in V2_FLAT)))
        blobs.append((head[0], spec_json, result_json))
    execute_many(f"INSERT INTO runs_v2 ({', '.join(names)}) VALUES ({','.join('?' * len(names))})", runs)
    execute_many("INSERT INTO run_blobs VALUES (?, ?, ?)", blobs)
    # SQLite's table-rebuild recipe; foreign keys are off (dashbench.store.migrate), so the drop cascades nowhere.
    execute("DROP TABLE runs", "ALTER TABLE runs_v2 RENAME TO runs", "CREATE INDEX runs_created ON runs(created_at)")
    # Every filter of the dashboard is an equality on one of these plus an ordering by time.
    execute(*(f"CREATE INDEX runs_{column} ON runs({column}, created_at)" for column in INDEXED))
    execute("CREATE INDEX runs_host_status ON runs(host, status)")


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
