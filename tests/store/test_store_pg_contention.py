"""Writers in each other's way on a PostgreSQL store: a real deadlock between two connections is tried
again and both transactions land; a write that waits on another writer's lock says so as the wait
starts (as on SQLite); and a run's guard keeps its heartbeat going while the run writes nothing."""

import os
import threading
import time

import psycopg
import pytest
from fixtures.store_backends import db_at  # noqa: F401 (a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC
from sqlalchemy.engine import make_url

from dashbench.jobs import run_guard
from dashbench.store import Store, StoreBusyError, database, retry
from dashbench.store import queue as store_queue


def _connect(url: str):
    u = make_url(url)
    return psycopg.connect(host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True)


def _wait_for(condition, seconds: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.05)


def _waiting_on_a_lock(admin, other_than: int) -> bool:
    return (
        admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid != %s"
            " AND datname = current_database()",
            (other_than,),
        ).fetchone()[0]
        > 0
    )


def _notices(monkeypatch) -> list:
    said = []
    monkeypatch.setattr(database, "LOCK_WAIT_NOTICE", lambda path: said.append(str(path)))
    return said


def test_a_real_deadlock_is_tried_again_and_both_writers_land(pg_url, monkeypatch):
    said = _notices(monkeypatch)
    with _connect(pg_url) as admin:
        # The store's sessions (all opened after this) find the deadlock, 3 s into their wait: time for the
        # other writer to join it on a loaded machine; the other writer never looks for it.
        admin.execute(f"ALTER DATABASE \"{make_url(pg_url).database}\" SET deadlock_timeout = '3s'")
        with Store(pg_url) as setup:
            first, second = setup.create_run(SPEC, run_id="run-a"), setup.create_run(SPEC, run_id="run-b")
        other = _connect(pg_url)
        other.execute("SET deadlock_timeout = '60s'")
        other.execute("BEGIN")
        other.execute("UPDATE runs SET label = 'other' WHERE run_id = %s", (second,))
        store = Store(pg_url)
        outcome = {}

        def delete():  # locks `first`'s row, then waits for `second`'s, which the other writer holds
            try:
                outcome["deleted"] = store.delete_runs([first, second])
            except Exception as exc:  # noqa: BLE001 (the test reports it)
                outcome["error"] = exc

        thread = threading.Thread(target=delete)
        thread.start()
        _wait_for(lambda: said, what="the lock wait to be said")  # its first, brief try gave up
        _wait_for(lambda: _waiting_on_a_lock(admin, other.info.backend_pid), what="the retried delete to wait")
        before = admin.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()").fetchone()[
            0
        ]
        # Now the other writer wants `first`: a cycle. The store's session is ended, tried again, waits.
        other.execute("UPDATE runs SET label = 'other' WHERE run_id = %s", (first,))
        other.execute("COMMIT")
        other.close()
        thread.join(60)
        store.close()
        assert outcome == {"deleted": 2}
        deadlocks = lambda: admin.execute(  # noqa: E731
            "SELECT pg_stat_clear_snapshot(), (SELECT deadlocks FROM pg_stat_database"
            " WHERE datname = current_database())"
        ).fetchone()[1]
        _wait_for(lambda: deadlocks() > before, what="the server to count the deadlock")
    with Store(pg_url) as store:
        assert store.count_runs() == 0


def test_conflicts_are_tried_a_bounded_number_of_times(pg_url, monkeypatch):
    tries = []
    with Store(pg_url) as store:

        def always_a_deadlock(self):
            tries.append(1)
            raise retry.Retryable("cannot x: database d is locked by another writer (deadlock detected)", "conflict")

        monkeypatch.setattr(Store, "_doomed", retry.retried(always_a_deadlock), raising=False)
        monkeypatch.setattr(retry.time, "sleep", lambda s: None)
        with pytest.raises(StoreBusyError, match="deadlock detected"):
            store._doomed()
    assert len(tries) == retry.CONFLICT_TRIES


def test_a_write_that_waits_on_another_writers_lock_says_so_then_lands(pg_url, monkeypatch):
    said = _notices(monkeypatch)
    with Store(pg_url) as store, _connect(pg_url) as other:
        run_id = store.create_run(SPEC)
        writes = {
            "samples": lambda: store.add_samples(run_id, [{"index": 0, "steps": 1, "duration_s": 0.1}]),
            "a new run": lambda: store.create_run(SPEC),
            "a finish": lambda: store.finish_run(run_id, "cancelled"),
        }
        for name, write in writes.items():
            said.clear()
            other.execute("BEGIN")
            other.execute("UPDATE dashbench_changes SET n = n + 1")  # the row every write bumps
            thread = threading.Thread(target=write)
            started = time.monotonic()
            thread.start()
            _wait_for(lambda: said, what=f"{name}: the wait to be said")
            assert time.monotonic() - started < retry.NOTICE_AFTER_S + 10, name
            assert thread.is_alive(), name  # said while it waits, not after
            other.execute("COMMIT")
            thread.join(30)
            assert said == [str(store.path)], name
        assert len(store.samples(run_id)) == 1 and store.count_runs() == 2
        assert store.get_run(run_id)["status"] == "cancelled"


def test_a_lock_held_past_the_busy_timeout_is_one_line(pg_url, monkeypatch):
    monkeypatch.setenv(database.BUSY_TIMEOUT_ENV, "1")
    said = _notices(monkeypatch)
    with Store(pg_url) as store, _connect(pg_url) as other:
        other.execute("BEGIN")
        other.execute("UPDATE dashbench_changes SET n = n + 1")
        with pytest.raises(StoreBusyError, match="cannot create a run: database .* is locked by another writer"):
            store.create_run(SPEC)
        other.execute("ROLLBACK")
        assert len(said) == 1
        assert store.count_runs() == 0


def test_the_guard_keeps_a_silent_runs_heartbeat_within_its_lapse(db_at, monkeypatch):
    monkeypatch.setenv(store_queue.HEARTBEAT_LAPSE_ENV, "1.5")  # beats every 0.5 s; the run lasts 3 s
    with Store(db_at) as store:
        run_id = store.create_run(SPEC)
        with run_guard.guarded(store, None) as state:
            state.update(run_id=run_id, begun=True)
            beats = []
            for _ in range(6):  # a long compile: the main thread writes nothing
                time.sleep(0.5)
                beats.append(
                    store._read("SELECT coalesce(heartbeat_at, started_at) FROM runs WHERE run_id = ?", (run_id,))[0][0]
                )
                assert store_queue.now() - beats[-1] < 1.5  # another host's reconcile now finds it alive
        assert beats[-1] > beats[0] + 1.5
        monkeypatch.setattr(store_queue, "this_host", lambda: "another-host")
        assert store.reconcile() == 0 and store.get_run(run_id)["status"] == "running"
        time.sleep(2.0)  # the guard gone, the lapse passes
        assert store.reconcile() == 1 and store.get_run(run_id)["status"] == "interrupted"
    assert os.environ[store_queue.HEARTBEAT_LAPSE_ENV] == "1.5"


def test_a_sample_write_takes_the_change_counter_last_so_it_never_deadlocks_a_claim(pg_url):
    # A pump's claim holds running runs' rows (its heartbeat for them) and bumps the counter at its end;
    # a run's sample write waiting for its row must not hold the counter meanwhile.
    with Store(pg_url) as store, _connect(pg_url) as claim:
        run_id = store.create_run(SPEC)
        claim.execute("SET lock_timeout = '300ms'")
        claim.execute("BEGIN")
        claim.execute("UPDATE runs SET heartbeat_at = 1 WHERE run_id = %s", (run_id,))
        thread = threading.Thread(
            target=store.add_samples, args=(run_id, [{"index": 0, "steps": 1, "duration_s": 0.1}])
        )
        thread.start()
        _wait_for(lambda: _waiting_on_a_lock(claim, claim.info.backend_pid), what="the sample write to wait")
        claim.execute("UPDATE dashbench_changes SET n = n + 1 WHERE id = 1")  # not held by the waiting write
        claim.execute("COMMIT")
        thread.join(30)
        assert len(store.samples(run_id)) == 1
