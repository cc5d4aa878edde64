"""v3: the job runner's columns (a run's phase, a cancel that outlives the process that asked, its log)
and the user's edits to the price catalog (dashbench.costs merges them over the shipped rows)."""

from dashbench.store.migrations import execute, on_sqlite

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if not on_sqlite():
        return
    execute("ALTER TABLE runs ADD COLUMN phase TEXT",
            "ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE runs ADD COLUMN log_path TEXT",
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
        )""")


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
