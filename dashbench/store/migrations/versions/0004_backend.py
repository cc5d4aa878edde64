"""v4: the Keras backend that ran a run (tensorflow | jax, a filter) and its version, filled for the runs
already stored (a run from before backends ran on TensorFlow; one bad row does not stop the upgrade)."""

from dashbench.store.migrations import execute, execute_many, on_sqlite, rows
from dashbench.store.schema import backend_values, json_or_none

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if not on_sqlite():
        return
    execute("ALTER TABLE runs ADD COLUMN backend TEXT", "ALTER TABLE runs ADD COLUMN backend_version TEXT")
    filled = []
    for run_id, spec_json, result_json in rows("SELECT run_id, spec_json, result_json FROM run_blobs"):
        values = backend_values(json_or_none(spec_json), json_or_none(result_json))
        filled.append((values["backend"], values["backend_version"], run_id))
    execute_many("UPDATE runs SET backend = ?, backend_version = ? WHERE run_id = ?", filled)
    execute("CREATE INDEX runs_backend ON runs(backend, created_at)")


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
