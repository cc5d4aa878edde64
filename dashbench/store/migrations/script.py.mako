"""${message}

Schema v${int(up_revision)}: ${message}. Runs on SQLite and PostgreSQL alike (see the migrations package's
docstring): op.* with migrations.types(), op.batch_alter_table for what SQLite's ALTER cannot do.
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

from dashbench.store.migrations import types  # noqa: F401

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = None
depends_on = None


def upgrade() -> None:
    ${upgrades if upgrades else "raise NotImplementedError('write the step')"}


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
