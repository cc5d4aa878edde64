"""v7: the logical CPUs of the host a run ran on (its result's env.cpu_count), filled for the runs already
stored: a CPU run is priced per vCPU-hour, as the cloud VM it ran on is."""

from dashbench.store.migrations import execute, execute_many, on_sqlite, rows
from dashbench.store.schema import host_values, json_or_none

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if not on_sqlite():
        return
    execute("ALTER TABLE runs ADD COLUMN host_cpus INTEGER")
    filled = []
    for run_id, result_json in rows("SELECT run_id, result_json FROM run_blobs WHERE result_json IS NOT NULL"):
        cpus = host_values(json_or_none(result_json))["host_cpus"]
        if cpus is not None:
            filled.append((cpus, run_id))
    execute_many("UPDATE runs SET host_cpus = ? WHERE run_id = ?", filled)


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
