"""Run statuses: the table of allowed moves, and the Store obeying it on every status write."""

import subprocess
import sys

import pytest
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC, result_for, samples_for

from dashbench.store import Store, StoreError, database, states
from dashbench.store.states import STATUSES

# Every move the lifecycle allows, written out: the table must say exactly this.
LEGAL = {
    (None, "queued"),
    (None, "running"),
    ("queued", "running"),
    ("queued", "failed"),
    ("queued", "cancelled"),
    ("queued", "interrupted"),
    ("running", "running"),
    ("running", "done"),
    ("running", "failed"),
    ("running", "cancelled"),
    ("running", "interrupted"),
    ("interrupted", "done"),
    ("interrupted", "failed"),
    ("interrupted", "cancelled"),
    ("interrupted", "interrupted"),
    # Out of memory: a queued run whose own check finds it cannot fit, a running one that ran out,
    # one presumed dead that reports it ran out.
    ("queued", "oom"),
    ("running", "oom"),
    ("interrupted", "oom"),
    # A to-accuracy run that missed its target ended with a result; a queued one never trained.
    ("running", "not_reached"),
    ("interrupted", "not_reached"),
}


def test_the_table_allows_exactly_the_legal_moves():
    table = {(old, new) for old in (None, *STATUSES) for new in STATUSES if states.allowed(old, new)}
    assert table == LEGAL


@pytest.mark.parametrize("old,new", sorted(LEGAL, key=str))
def test_each_legal_move_is_accepted(old, new):
    assert states.allowed(old, new)
    if old is not None:
        assert old in states.sources(new)


@pytest.mark.parametrize(
    "old,new",
    [
        ("done", "running"),
        ("failed", "running"),
        ("cancelled", "running"),
        ("interrupted", "running"),
        ("done", "failed"),
        ("cancelled", "done"),
        ("done", "done"),
        ("queued", "done"),  # a run that never ran has no result
        ("queued", "not_reached"),
        ("not_reached", "done"),
        ("done", "not_reached"),
        ("running", "queued"),
        ("done", "queued"),
        (None, "done"),
        ("no-such-status", "running"),
    ],
)
def test_illegal_moves_are_refused(old, new):
    assert not states.allowed(old, new)
    assert old not in states.sources(new)


def test_final_statuses_never_change_and_every_status_has_a_row():
    assert set(states.MOVES) == {None, *STATUSES}
    assert all(set(targets) <= set(STATUSES) for targets in states.MOVES.values())
    for status in states.FINAL:
        assert states.MOVES[status] == ()
    assert states.sources("running") == ("queued", "running")


# -- through the Store ------------------------------------------------------------------------------


def _done_run(store: Store) -> str:
    run_id = store.create_run(SPEC)
    store.add_samples(run_id, samples_for(2))
    assert store.finish_run(run_id, "done", result_for(SPEC, 10.0))
    return run_id


def test_a_done_run_never_runs_again(db_at):
    with Store(db_at) as store:
        run_id = _done_run(store)
        with pytest.raises(StoreError, match="is done; only a queued run can start"):
            store.start_run(run_id, pid=1)
        assert not store.finish_run(run_id, "failed", error="late")
        assert not store.finish_unreported(run_id, "failed", "exit code 1")
        assert store.request_cancel(run_id) == "done"
        # The one write of a status refuses it too, whoever calls it.
        with store._write("test") as conn:
            assert not database._move(conn, run_id, "running", {"pid": 1})
        run = store.get_run(run_id)
        assert run["status"] == "done" and run["error"] is None and run["result"].examples_per_sec == 10.0
        assert run["pid"] != 1


def test_an_interrupted_run_may_still_report_its_end(db_at):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with Store(db_at) as store:
        run_id = store.create_run(SPEC, pid=dead.pid)
        assert store.reconcile() == 1 and store.get_run(run_id)["status"] == "interrupted"
        # Its launcher's verdict does not overwrite another process's...
        assert not store.finish_unreported(run_id, "failed", "exit code 1")
        # ...but the run's own report does, and after that nothing does.
        assert store.finish_run(run_id, "done", result_for(SPEC, 5.0))
        assert not store.finish_run(run_id, "interrupted")
        assert store.get_run(run_id)["status"] == "done"


def test_finish_unreported_ends_a_live_run_once(db_at):
    with Store(db_at) as store:
        run_id = store.create_run(SPEC)
        store.set_phase(run_id, "measure")
        assert store.finish_unreported(run_id, "failed", "run process exited with code 3")
        run = store.get_run(run_id)
        assert (run["status"], run["error"], run["phase"]) == ("failed", "run process exited with code 3", None)
        assert run["finished_at"] is not None
        assert not store.finish_unreported(run_id, "cancelled", "again")
        assert store.get_run(run_id)["status"] == "failed"
        with pytest.raises(ValueError, match="a run ends as one of"):
            store.finish_unreported(run_id, "running", "no")


def test_new_and_imported_runs_start_where_the_table_says(db_at):
    with Store(db_at) as store:
        with pytest.raises(ValueError, match="a new run is 'running' or 'queued'"):
            store.create_run(SPEC, status="done")
        run = {"run_id": "x", "status": "running", "spec": SPEC.to_dict(), "created_at": 1.0, "samples": []}
        with pytest.raises(ValueError, match="an imported run has ended"):
            store.import_rows([{**run, "run_id": "ok", "status": "done"}, run])
        assert store.count_runs() == 0  # one transaction: the good run before it is not kept either
