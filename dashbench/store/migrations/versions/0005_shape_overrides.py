"""v5: the spec's shape overrides (NULL: the workload's full-size default), filled for the runs already
stored, so that a quick-shape run is never listed, labelled or compared as a full-size one."""

from dashbench.store.migrations import execute, execute_many, on_sqlite, rows
from dashbench.store.schema import json_or_none, shape_values

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if not on_sqlite():
        return
    execute("ALTER TABLE runs ADD COLUMN image_size INTEGER", "ALTER TABLE runs ADD COLUMN seq_len INTEGER",
            "ALTER TABLE runs ADD COLUMN width INTEGER")
    filled = []
    for run_id, spec_json in rows("SELECT run_id, spec_json FROM run_blobs"):
        values = shape_values(json_or_none(spec_json))
        if any(v is not None for v in values.values()):
            filled.append((values["image_size"], values["seq_len"], values["width"], run_id))
    execute_many("UPDATE runs SET image_size = ?, seq_len = ?, width = ? WHERE run_id = ?", filled)


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
