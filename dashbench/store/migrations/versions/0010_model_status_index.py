"""v10: a (model, status) index for Compare's count of the runs matching its filters (`count(*) … WHERE
model IN (…) AND status IN (…)`): read from the index alone, where runs_model (model, created_at) made
both databases fetch every matching run's row for its status (0.18 s on SQLite, 0.25 s on PostgreSQL at
1M runs). Runs on SQLite and PostgreSQL alike.
"""

from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("runs_model_status", "runs", ["model", "status"])


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
