"""v11: on PostgreSQL, a statement's samples are checked against runs once per statement, not once per row.

The samples -> runs foreign key ran its check (a locking look-up of the run) for every row: 0.43-0.54 ms of
a 100-sample batch's ~1.0 ms on the server, the biggest part of a run's write path after the round trips.
Two statement-level triggers keep what it promised, for every writer (the store, a COPY, SQL by hand):

- samples_need_runs (after INSERT, and UPDATE, of samples): the distinct run ids the statement wrote must
  each be a row of runs, locked FOR KEY SHARE as the foreign key's check locked it, else the statement
  fails with foreign_key_violation (an IntegrityError, as before): a missing run's samples are refused.
- runs_take_samples (after DELETE on runs): the deleted runs' samples go too (the key's ON DELETE CASCADE).

Races end as the key's did (READ COMMITTED, the store's level; each statement of a trigger sees what was
committed before it): a run deleted while its samples are written either commits first (the samples'
lock finds no row: refused) or waits on that lock until they commit (its cascade then sees and deletes
them). A run's id is never changed: run_blobs' key still refuses it. SQLite keeps its foreign key: its
check per row costs a B-tree probe in-process, nothing worth a table rebuild.
"""

from dashbench.store.migrations import execute, on_sqlite

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# One statement each (a function's body holds semicolons of its own).
POSTGRES_SQL = (
    """ALTER TABLE samples DROP CONSTRAINT IF EXISTS samples_run_id_fkey""",
    """CREATE FUNCTION dashbench_samples_need_runs() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    PERFORM 1 FROM (SELECT DISTINCT run_id FROM added) AS wanted
        WHERE NOT EXISTS (SELECT 1 FROM runs WHERE runs.run_id = wanted.run_id FOR KEY SHARE OF runs);
    IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "samples" violates foreign key constraint "samples_need_runs"'
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = 'a sample''s run_id is not a run of table "runs"';
    END IF;
    RETURN NULL;
END
$body$""",
    """CREATE TRIGGER samples_need_runs AFTER INSERT ON samples REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION dashbench_samples_need_runs()""",
    """CREATE TRIGGER samples_need_runs_on_update AFTER UPDATE ON samples REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION dashbench_samples_need_runs()""",
    """CREATE FUNCTION dashbench_runs_take_samples() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    DELETE FROM samples WHERE run_id IN (SELECT run_id FROM gone);
    RETURN NULL;
END
$body$""",
    """CREATE TRIGGER runs_take_samples AFTER DELETE ON runs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION dashbench_runs_take_samples()""",
)


def upgrade() -> None:
    if on_sqlite():
        return
    execute(*POSTGRES_SQL)


def downgrade() -> None:
    raise NotImplementedError("the store's migrations only move forward")
