"""v6: `dashbench doctor`'s verdicts, one row per host, device kind and backend checked."""

from dashbench.store.migrations import execute, on_sqlite

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if not on_sqlite():
        return
    execute("""CREATE TABLE calibrations (
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
        )""", "CREATE INDEX calibrations_host ON calibrations(host, device, created_at)")


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
