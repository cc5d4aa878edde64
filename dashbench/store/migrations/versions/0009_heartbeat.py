"""v9: when a running run last said it is alive (its samples, its phase, its host's job queue): a run on
another host whose heartbeat lapsed is presumed dead, so its claim is given up, never run twice."""

from dashbench.store.migrations import execute, on_sqlite

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if not on_sqlite():
        return
    execute("ALTER TABLE runs ADD COLUMN heartbeat_at REAL")


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
