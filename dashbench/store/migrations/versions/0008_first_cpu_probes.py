"""v8: the first CPU probe of a host on a backend, per dtype: the provisional peak that host's CPU runs
share until `doctor` calibrates it (one probe per run made early MFUs incomparable)."""

from dashbench.store.migrations import execute, on_sqlite

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if not on_sqlite():
        return
    execute("""CREATE TABLE first_cpu_probes (
            host       TEXT NOT NULL,
            backend    TEXT NOT NULL,
            dtype      TEXT NOT NULL,
            tflops     REAL NOT NULL,
            created_at REAL NOT NULL,
            run_id     TEXT,
            PRIMARY KEY (host, backend, dtype)
        )""")


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
