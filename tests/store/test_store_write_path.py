"""A run's write path on both databases: each write is one statement on a server (pg_connection.write_now),
so what a separate read used to check first is checked by the write itself — these tests hold it to the
same answers: a duplicate id, a missing run, a late end that must not overwrite the result, samples'
values exactly as given."""

import math
import threading

import pytest
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC, result_for, samples_for

from dashbench.core.spec import RunSpec
from dashbench.store import Store, StoreError
from dashbench.store.postgres.dialect import array_text


def test_a_run_ends_once_and_a_late_end_leaves_its_result(db_at):
    with Store(db_at) as store:
        run_id = store.create_run(SPEC, run_id="write-path-1")
        with pytest.raises(StoreError, match="run write-path-1 already exists"):
            store.create_run(RunSpec(model="bilstm", batch_size=8), run_id="write-path-1")
        assert store.finish_run(run_id, "done", result_for(SPEC, 10.0))
        # A second end, with another result, changes nothing: the result is written only with the move.
        assert not store.finish_run(run_id, "done", result_for(SPEC, 99.0, device="gpu"))
        assert not store.finish_run(run_id, "failed", error="late")
        with pytest.raises(StoreError, match="no run nope"):
            store.finish_run("nope", "done", result_for(SPEC, 1.0))
        with pytest.raises(StoreError, match="no run nope"):
            store.finish_run("nope", "failed", error="x")
    with Store(db_at, read_only=True) as store:
        run = store.get_run(run_id)
        assert (run["status"], run["error"], run["spec"]["model"]) == ("done", None, SPEC.model)
        assert run["result"].examples_per_sec == 10.0
        assert list(store.runs(device="cpu")["run_id"]) == [run_id] and store.runs(device="gpu").empty


def test_a_run_created_by_another_handle_ends_with_its_stored_spec(db_at):
    with Store(db_at) as store:
        queued = store.create_run(SPEC, status="queued")
    # Another process (the run's own) starts and ends it: it reads the spec, this handle never saw it.
    with Store(db_at) as store:
        store.start_run(queued, pid=4242, log_path="/logs/a.log")
        first = store.get_run(queued)
        store.start_run(queued, pid=4343)  # the job runner's running → running: times and log kept
        again = store.get_run(queued)
        assert (again["pid"], again["log_path"], again["started_at"]) == (4343, "/logs/a.log", first["started_at"])
        assert store.finish_run(queued, "done", result_for(SPEC, 7.0))
        with pytest.raises(StoreError, match="is done; only a queued run can start"):
            store.start_run(queued, pid=1)
        with pytest.raises(StoreError, match="no run nope"):
            store.start_run("nope", pid=1)
        frame = store.runs(model=SPEC.model, batch_size=SPEC.batch_size, status="done")
        assert list(frame["run_id"]) == [queued] and frame["examples_per_sec"].iloc[0] == 7.0


def test_samples_come_back_exactly_as_given(db_at):
    losses = [2.3 - 0.01 * k for k in range(96)] + [float("nan"), float("inf"), float("-inf"), None]
    given = [
        {"index": k, "steps": 3, "duration_s": 0.01 + k * 1e-7, "loss": loss, "warmup": k < 2}
        for k, loss in enumerate(losses)
    ]
    with Store(db_at) as store:
        run_id = store.create_run(SPEC)
        store.add_samples(run_id, given)
        store.add_samples(run_id, [dict(given[5], loss=0.5)])  # one index again: the last one given is kept
        # A batch sent again (its answer lost), with a new index among them: every row lands, once.
        store.add_samples(run_id, [dict(s, loss=0.25) for s in given[10:20]] + [dict(given[0], index=100)])
        frame = store.samples(run_id)
    assert list(frame["index"]) == list(range(101)) and set(frame["steps"]) == {3}
    assert list(frame["duration_s"])[:100] == [s["duration_s"] for s in given]  # exactly, not nearly
    assert list(frame["warmup"].astype(bool))[:100] == [s["warmup"] for s in given]
    stored = list(frame["loss"])
    assert stored[5] == 0.5 and stored[10:20] == [0.25] * 10 and stored[100] == losses[0]
    assert stored[:5] == losses[:5] and stored[6:10] == losses[6:10] and stored[20:96] == losses[20:96]
    assert math.isnan(stored[96]) and stored[97:99] == [math.inf, -math.inf] and math.isnan(stored[99])


def test_a_runs_last_samples_are_written_with_its_end(db_at, monkeypatch):
    """finish_run(samples=…): the runner's last batch goes with the end, on a server in the end's one
    statement; stored even when the run had ended already (as add_samples stores them), a batch sent
    again replaces its rows, and a missing run is said as before."""
    from dashbench.store.postgres import direct as pg_direct

    with Store(db_at) as store:
        run_id, ended = store.create_run(SPEC), store.create_run(SPEC)
        store.add_samples(run_id, samples_for(100))
        statements = []
        monkeypatch.setattr(pg_direct, "execute", lambda *a, real=pg_direct.execute: statements.append(a) or real(*a))
        last = [dict(s, index=s["index"] + 100, loss=0.125) for s in samples_for(50)]
        assert store.finish_run(run_id, "done", result_for(SPEC, 10.0), samples=last)
        if on_server(db_at):
            assert len(statements) == 1  # the samples, the end, its result and the change counter: one trip
        frame = store.samples(run_id)
        assert list(frame["index"]) == list(range(150)) and list(frame["loss"])[100:] == [0.125] * 50
        assert store.get_run(run_id)["status"] == "done"
        # Ended already: the end stays as it was, the samples still land.
        assert not store.finish_run(run_id, "failed", error="late", samples=[dict(last[0], index=150)])
        assert len(store.samples(run_id)) == 151 and store.get_run(run_id)["error"] is None
        # A batch whose indexes are stored (sent again after its answer was lost): replaced, then the end.
        store.add_samples(ended, samples_for(10))
        again = [dict(s, loss=9.0) for s in samples_for(15)[5:]]
        assert store.finish_run(ended, "failed", error="boom", samples=again)
        frame = store.samples(ended)
        assert list(frame["index"]) == list(range(15)) and list(frame["loss"])[5:] == [9.0] * 10
        assert (store.get_run(ended)["status"], store.get_run(ended)["error"]) == ("failed", "boom")
        with pytest.raises(StoreError, match="no run nope in .*its samples were not stored"):
            store.finish_run("nope", "failed", error="x", samples=samples_for(2))
        assert store._read("SELECT count(*) FROM samples WHERE run_id = 'nope'") == [(0,)]


def test_a_batchs_one_run_id_is_sent_to_a_server_once():
    from dashbench.store.postgres.dialect import POSTGRES

    columns, types = ("run_id", "idx"), ("text", "integer")
    sql, params = POSTGRES.insert_rows("samples", columns, types, [("r", 1), ("r", 2)], same=("run_id",))
    assert params == ["r", "{1,2}"] and "SELECT ?::text, u.c1 FROM unnest(?::integer[])" in sql
    sql, params = POSTGRES.insert_rows("samples", columns, types, [("r", 1), ("s", 2)], same=("run_id",))
    assert params == ['{"r","s"}', "{1,2}"] and "SELECT u.c0, u.c1 FROM unnest(?::text[], ?::integer[])" in sql


def test_array_text_quotes_what_postgresql_would_misread():
    assert array_text("text", ['a"b', "c\\d", "e,f", None]) == '{"a\\"b","c\\\\d","e,f",NULL}'
    assert array_text("integer", [1, True, None]) == "{1,1,NULL}"
    assert array_text("double precision", [0.1, 1, None, float("nan")]) == "{0.1,1.0,NULL,nan}"


def test_the_samples_of_a_missing_run_are_refused_and_a_deleted_runs_go_with_it(db_at):
    with Store(db_at) as store:
        kept, dropped = store.create_run(SPEC), store.create_run(SPEC)
        store.add_samples(kept, samples_for(3))
        store.add_samples(dropped, samples_for(3))
        for missing in ("never-made", dropped):
            if missing == dropped:
                assert store.delete_runs([dropped]) == 1
            with pytest.raises(StoreError, match=f"no run {missing} in .*its samples were not stored"):
                store.add_samples(missing, samples_for(2))
        assert store._read("SELECT run_id, count(*) FROM samples GROUP BY run_id") == [(kept, 3)]
        assert len(store.samples(kept)) == 3


def _raw(url: str):
    import psycopg

    return psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)


def test_every_writer_on_a_server_is_held_to_the_samples_runs_key(pg_url):
    """The key is checked once per statement on a server (migration 0011), for SQL by hand and a COPY too:
    a missing run's samples are refused, a deleted run's samples go with it, and a run deleted while its
    samples are being written leaves none behind, whichever of the two commits first."""
    import psycopg

    with Store(pg_url) as store:
        first, second, third = (store.create_run(SPEC) for _ in range(3))
        store.add_samples(first, samples_for(2))
    insert = "INSERT INTO samples (run_id, idx, steps, duration_s) VALUES (%s, %s, 1, 0.1)"
    with _raw(pg_url) as conn:
        for sql, params in (
            (insert, ("never-made", 0)),
            (
                "INSERT INTO samples (run_id, idx, steps, duration_s) VALUES (%s, 10, 1, 0.1), (%s, 11, 1, 0.1)",
                (first, "never-made"),
            ),
            ("UPDATE samples SET run_id = 'never-made' WHERE run_id = %s", (first,)),
        ):
            with pytest.raises(psycopg.errors.ForeignKeyViolation):
                conn.execute(sql, params)
        with (
            pytest.raises(psycopg.errors.ForeignKeyViolation),
            conn.cursor().copy("COPY samples (run_id, idx, steps, duration_s) FROM STDIN") as copy,
        ):
            copy.write_row(("never-made", 0, 1, 0.1))
        conn.execute("DELETE FROM runs WHERE run_id = %s", (first,))  # by hand: its samples go too
        assert conn.execute("SELECT count(*) FROM samples").fetchone()[0] == 0
        # The samples first, the delete waiting on them: the delete takes the samples committed meanwhile.
        with _raw(pg_url) as other:
            conn.execute("BEGIN")
            conn.execute(insert, (second, 0))
            deleting = threading.Thread(target=other.execute, args=("DELETE FROM runs WHERE run_id = %s", (second,)))
            deleting.start()
            deleting.join(0.5)
            assert deleting.is_alive()  # waiting on the samples' lock on their run
            conn.execute("COMMIT")
            deleting.join()
            # The delete first, the samples waiting on it: refused once the delete commits.
            other.execute("BEGIN")
            other.execute("DELETE FROM runs WHERE run_id = %s", (third,))
            failed = []
            adding = threading.Thread(target=lambda: _record_failure(conn, insert, (third, 0), failed))
            adding.start()
            adding.join(0.5)
            assert adding.is_alive()
            other.execute("COMMIT")
            adding.join()
            assert [type(exc) for exc in failed] == [psycopg.errors.ForeignKeyViolation]
        assert conn.execute("SELECT count(*) FROM samples").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def _record_failure(conn, sql, params, failed: list) -> None:
    try:
        conn.execute(sql, params)
    except Exception as exc:  # noqa: BLE001 (handed to the test's thread to assert on)
        failed.append(exc)


def test_a_server_write_sends_its_values_as_psycopg_would_or_leaves_them_to_psycopg():
    from dashbench.store.postgres import direct as pg_direct

    assert pg_direct.typed(["é", None, 7, -(2**63), 0.1, float("-inf")]) == (
        (0, 0, 20, 20, 701, 701),
        ["é".encode(), None, b"7", b"-9223372036854775808", b"0.1", b"-inf"],
    )
    for other in (True, 2**63, b"x", [1], "a\x00b"):  # a bool, a numeric, bytes, an array, a NUL: psycopg's
        assert pg_direct.typed(["a", other]) is None


def test_a_server_write_survives_its_prepared_statements_discarded_and_stores_odd_floats_exactly(pg_url):
    with Store(pg_url) as store:
        run_id = store.create_run(SPEC)
        odd = [float("nan"), float("inf"), float("-inf"), None, 5e-324, 0.1 + 0.2]
        for k, loss in enumerate(odd):  # one sample a write: a one-row INSERT, each value a parameter
            store.add_samples(run_id, [{"index": k, "steps": 1, "duration_s": 0.01 + k, "loss": loss}])
            if k == 2:  # what a pooler or DISCARD ALL by hand does: the connection's statements are gone
                with store._connection() as conn:
                    conn.execute("DEALLOCATE ALL")
        assert store.finish_run(run_id, "done", result_for(SPEC, 3.0))
        stored = list(store.samples(run_id)["loss"])
    assert math.isnan(stored[0]) and stored[1:3] == [math.inf, -math.inf] and math.isnan(stored[3])
    assert stored[4:] == [5e-324, 0.1 + 0.2]


def test_a_server_write_cut_off_by_a_lost_connection_is_one_line_and_the_next_write_reconnects(pg_url):
    with Store(pg_url) as store:
        run_id = store.create_run(SPEC)
        store.add_samples(run_id, samples_for(1))
        with _raw(pg_url) as admin:  # the server ends this store's session (a restart, a dropped tunnel)
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'dashbench'"
                " AND datname = current_database()"
            )
        # Said as the driver read it: the server's goodbye, or the socket found closed.
        with pytest.raises(
            StoreError, match="cannot add samples: database .*: (server closed the connection|terminating connection)"
        ):
            store.add_samples(run_id, [dict(samples_for(2)[1])])
        store.add_samples(run_id, [dict(samples_for(3)[2])])  # a fresh connection from the pool
        assert list(store.samples(run_id)["index"]) == [0, 2]
