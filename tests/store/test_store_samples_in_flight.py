"""add_samples(wait=False), the runner's mid-run batches: on a server the batch is sent and the call returns
while the server stores it (libpq's pipeline mode); the handle's next call reads the answer first. These
tests hold it to what a waited-for batch promises: every row stored exactly, a batch sent again replaces
its rows, a missing run or a lost connection is said (one call later), and nothing else on the connection
is mixed up with the answer."""

import threading
import time

import pytest
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC, result_for, samples_for

from dashbench.store import Store, StoreError


def _raw(url: str):
    import psycopg

    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)


def _waiting_on_a_lock(admin, pid: int) -> bool:
    row = admin.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


def test_a_batch_not_waited_for_is_stored_and_read_back_by_the_next_call(db_at):
    with Store(db_at) as store:
        run_id = store.create_run(SPEC)
        store.add_samples(run_id, samples_for(100), wait=False)
        # The next call, whatever it is, reads the answer first: here a read that must see the batch.
        assert list(store.samples(run_id)["index"]) == list(range(100))
        store.add_samples(run_id, [dict(s, index=s["index"] + 100) for s in samples_for(50)], wait=False)
        store.add_samples(run_id, [dict(s, index=s["index"] + 150) for s in samples_for(50)], wait=False)
        assert store.finish_run(
            run_id, "done", result_for(SPEC, 5.0), samples=[dict(s, index=s["index"] + 200) for s in samples_for(10)]
        )
        store.add_samples(run_id, [dict(samples_for(1)[0], index=300)], wait=False)  # answered by close()
    with Store(db_at, read_only=True) as store:
        frame = store.samples(run_id)
        assert list(frame["index"]) == [*range(210), 300] and store.get_run(run_id)["status"] == "done"


def test_the_run_goes_on_while_its_batch_waits_on_the_server(pg_url):
    """The call returns while the server holds the batch behind a lock; the next call waits for it."""
    with Store(pg_url) as store, _raw(pg_url) as admin, _raw(pg_url) as blocker:
        run_id = store.create_run(SPEC)
        pid = store._read("SELECT pg_backend_pid()")[0][0]
        blocker.execute("BEGIN")
        blocker.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (run_id,))  # the key check waits
        store.add_samples(run_id, samples_for(100), wait=False)
        deadline = time.monotonic() + 60
        while not _waiting_on_a_lock(admin, pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _waiting_on_a_lock(admin, pid)  # returned to the caller, the batch still on the server
        read = []
        reading = threading.Thread(target=lambda: read.append(len(store.samples(run_id))))
        reading.start()
        reading.join(0.5)
        assert reading.is_alive()  # the next call waits for the answer before anything else
        blocker.execute("COMMIT")
        reading.join()
        assert read == [100]


def test_a_batch_refused_in_flight_goes_again_or_is_said_by_the_next_call(pg_url):
    with Store(pg_url) as store:
        run_id = store.create_run(SPEC)
        store.add_samples(run_id, samples_for(10))
        # Sent again with new values (its first answer lost): refused by the key, then replaced.
        store.add_samples(run_id, [dict(s, loss=7.0) for s in samples_for(15)[5:]], wait=False)
        frame = store.samples(run_id)
        assert list(frame["index"]) == list(range(15)) and list(frame["loss"])[5:] == [7.0] * 10
        store.add_samples("no-such-run", samples_for(3), wait=False)
        with pytest.raises(StoreError, match="no run no-such-run in .*its samples were not stored"):
            store.get_run(run_id)
        assert store.get_run(run_id)["run_id"] == run_id  # said once: the handle goes on


def test_a_batch_in_flight_when_the_connection_is_lost_is_one_line_and_the_handle_reconnects(pg_url):
    with Store(pg_url) as store, _raw(pg_url) as admin, _raw(pg_url) as blocker:
        run_id = store.create_run(SPEC)
        pid = store._read("SELECT pg_backend_pid()")[0][0]
        blocker.execute("BEGIN")
        blocker.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (run_id,))
        store.add_samples(run_id, samples_for(5), wait=False)
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))  # a restart, a dropped tunnel
        blocker.execute("ROLLBACK")
        with pytest.raises(
            StoreError,
            match="cannot add samples: database .*: (server closed the connection"
            "|terminating connection|consuming input failed)",
        ):
            store.samples(run_id)
        store.add_samples(run_id, [dict(samples_for(7)[6])], wait=False)  # a fresh connection from the pool
        assert list(store.samples(run_id)["index"]) == [6]
        # Lost again with a batch in flight, the run's end sent behind it: said, and the end can be made.
        pid = store._read("SELECT pg_backend_pid()")[0][0]
        blocker.execute("BEGIN")
        blocker.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (run_id,))
        store.add_samples(run_id, [dict(samples_for(8)[7])], wait=False)
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        blocker.execute("ROLLBACK")
        with pytest.raises(StoreError, match="cannot (add samples|finish a run): database "):
            store.finish_run(run_id, "done", result_for(SPEC, 2.0), samples=[dict(samples_for(9)[8])])
        assert store.finish_run(run_id, "done", result_for(SPEC, 2.0), samples=[dict(samples_for(9)[8])])
        assert list(store.samples(run_id)["index"]) == [6, 8] and store.get_run(run_id)["status"] == "done"


def test_a_runs_end_goes_behind_its_batch_in_flight_in_the_same_trip(pg_url, monkeypatch):
    from dashbench.store.postgres import direct as pg_direct

    with Store(pg_url) as store:
        for attempt in range(2):  # the second run after the connection's prepared statements were discarded
            run_id = store.create_run(SPEC)
            store.add_samples(run_id, samples_for(10))
            waited = []
            monkeypatch.setattr(
                pg_direct, "execute", lambda *a, real=pg_direct.execute, waited=waited: waited.append(a) or real(*a)
            )
            # Sent again with new values (its answer lost): refused on the server, replaced after the end.
            store.add_samples(run_id, [dict(s, loss=7.0) for s in samples_for(20)[5:]], wait=False)
            assert store.finish_run(
                run_id, "done", result_for(SPEC, 5.0), samples=[dict(s, index=s["index"] + 20) for s in samples_for(5)]
            )
            monkeypatch.undo()
            frame = store.samples(run_id)
            assert list(frame["index"]) == list(range(25)) and list(frame["loss"])[5:20] == [7.0] * 15
            assert store.get_run(run_id)["status"] == "done"
            if attempt == 0:  # the end went behind the batch: not a statement of its own waited for
                assert not [a for a in waited if "UPDATE runs SET status" in a[1]]
                # ...prepared in the pipeline with it, so the next run's end is not parsed and planned again
                assert store._read(
                    "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE"
                    " '%UPDATE runs SET status%' AND statement LIKE '%INSERT INTO samples%'"
                ) == [(1,)]
                with store._connection() as conn:
                    conn.execute("DEALLOCATE ALL")  # what a pooler or DISCARD ALL by hand does
