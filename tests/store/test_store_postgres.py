"""The team store: a postgresql+psycopg:// URL opens the same Store on a real PostgreSQL server.
Its promises that SQLite keeps by other means: the change token, read-only sessions and a SELECT-only role,
queue claims across hosts, a dead host's claim given up after its heartbeat lapses, a password shown
nowhere. (The store's own suite runs on both databases through store_backends.db_at.)"""

import json
import os
import threading

import pytest
from fixtures import bench_scripts
from fixtures.cli_runs import run_cli
from fixtures.pg_server import create_reader
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC, result_for, samples_for

from dashbench.jobs import queue as jobs_queue
from dashbench.store import ReadOnlyError, SchemaVersionError, Store, StoreError, masked, schema
from dashbench.store import queue as store_queue
from dashbench.views.common import settings

PASSWORD = "s3cret-Pw"


def with_password(url: str) -> str:
    # The tests' server trusts local connections: any password opens it, and none may be shown.
    return url.replace("postgres@", f"postgres:{PASSWORD}@", 1)


def _done_run(store, label="base") -> str:
    run_id = store.create_run(SPEC.replace(label=label))
    store.add_samples(run_id, samples_for(3))
    store.finish_run(run_id, "done", result_for(SPEC, 100.0))
    return run_id


def test_a_new_database_becomes_a_store_at_the_head_and_a_newer_one_is_refused(pg_url):
    with Store(pg_url) as store:
        assert store.is_server and store.schema_version == schema.SCHEMA_VERSION
        _done_run(store)
    with Store(pg_url) as again:  # opened again: found made, nothing lost
        assert again.count_runs() == 1
    with Store(pg_url) as store, store._write("test") as conn:
        conn.execute("UPDATE dashbench_schema SET version = 99")
    for read_only in (False, True):
        with pytest.raises(SchemaVersionError, match="schema v99, newer than this dashbench"):
            Store(pg_url, read_only=read_only)


def test_processes_opening_a_new_database_together_all_get_one_store(pg_url):
    errors = []

    def open_it():
        try:
            with Store(pg_url) as store:
                store.create_run(SPEC)
        except Exception as exc:  # the test fails on any
            errors.append(repr(exc))

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    with Store(pg_url, read_only=True) as store:
        assert store.count_runs() == 6


def test_an_empty_or_foreign_database_is_refused_read_only_and_not_taken_over(pg_url):
    with pytest.raises(StoreError, match="empty or not a dashbench database"):
        Store(pg_url, read_only=True)
    import psycopg
    from sqlalchemy.engine import make_url

    parsed = make_url(pg_url)
    with psycopg.connect(
        host=parsed.host, port=parsed.port, user=parsed.username, dbname=parsed.database, autocommit=True
    ) as conn:
        conn.execute("CREATE TABLE theirs (x integer)")
    with pytest.raises(StoreError, match="holds tables but is not a dashbench database"):
        Store(pg_url)


def test_the_change_token_moves_with_every_commit_from_anywhere_and_only_then(pg_url):
    with Store(pg_url) as store, Store(pg_url, read_only=True) as reader:
        token = reader.change_token()
        assert reader.change_token() == token and store.change_token() == token
        run_id = store.create_run(SPEC)
        moved = reader.change_token()
        assert moved != token
        store.runs(), store.get_run(run_id), store.facets()  # reads change nothing
        assert reader.change_token() == moved
        store.add_samples(run_id, samples_for(2))
        assert reader.change_token() != moved
        with pytest.raises(StoreError):  # a write that fails changes nothing: its counter is rolled back
            store.create_run(SPEC, run_id=run_id)
        assert "postgres:" not in repr(token) or "***" in repr(token) or PASSWORD not in repr(token)


def test_read_only_sessions_and_a_select_only_role_cannot_write_even_past_the_store(pg_url):
    with Store(pg_url) as owner:
        run_id = _done_run(owner)
    reader_url = create_reader(pg_url)
    with pytest.raises(ReadOnlyError, match=r"read-only for role reader_\w+ \(it may only SELECT\): open it read-only"):
        Store(reader_url)  # opened for writing: the role is named at once, not by the first write
    for url, read_only in ((pg_url, True), (reader_url, True)):
        with Store(url, read_only=read_only) as store:
            assert store.get_run(run_id)["status"] == "done" and len(store.runs()) == 1
            with pytest.raises(ReadOnlyError, match="read-only"):
                store.check_writable()
            with pytest.raises(ReadOnlyError):
                store.delete_runs([run_id])
            # A page that went round the Store's checks: the server itself refuses.
            import psycopg

            with store._connection() as conn, pytest.raises(psycopg.Error, match="read-only|permission denied"):
                conn.execute("DELETE FROM runs")
    with Store(pg_url, read_only=True) as store:
        assert store.count_runs() == 1


def test_a_password_in_the_url_appears_nowhere(pg_url, tmp_path, capsys, monkeypatch):
    url = with_password(pg_url)
    with Store(url) as store:
        run_id = _done_run(store)
        shown = [repr(store), str(store.path), repr(store.change_token()), str(store.location)]
        assert store.location.url == url  # what opens it in another process, through its environment
    assert all(PASSWORD not in text and "***" in text for text in shown), shown
    assert masked(url) == url.replace(PASSWORD, "***")
    # Every command's output and errors; an export's recorded source.
    bundle = tmp_path / "b.json"
    for argv in (["list"], ["show", run_id], ["export", "--out", str(bundle)], ["show", "nope"]):
        code, out, err = run_cli(capsys, *argv, "--db", url)
        assert PASSWORD not in out + err, argv
    monkeypatch.setenv("DASHBENCH_DB", url)
    code, out, err = run_cli(capsys, "list", "--json")
    assert code == 0 and json.loads(out)[0]["run_id"] == run_id and PASSWORD not in out + err
    assert PASSWORD not in bundle.read_text() and "***" in bundle.read_text()
    # An error from the server, and one from a server that is not there.
    with pytest.raises(StoreError) as wrong_db:
        Store(url.rsplit("/", 1)[0] + "/no_such_database")
    with pytest.raises(StoreError) as no_server:
        Store(f"postgresql+psycopg://someone:{PASSWORD}@127.0.0.1:1/results")
    for exc in (wrong_db, no_server):
        text = str(exc.value)
        assert PASSWORD not in text and "***" in text and len(text.splitlines()) == 1, text
    # The dashboard's settings (what its sidebar and messages show).
    loaded = settings.load(["--db", url], {})
    assert PASSWORD not in str(loaded.db_path) and PASSWORD not in f"{loaded.db_path}" and "***" in loaded.db_path
    with Store(loaded.db_path, read_only=True) as store:  # and it still opens the database
        assert store.count_runs() == 1


def test_the_job_runner_hands_a_run_process_the_url_in_its_environment_only(pg_url, tmp_path, monkeypatch):
    url = with_password(pg_url)
    seen = {}

    class FakeProcess:
        pid = 999999
        returncode = None

        def poll(self):
            return None

    def fake_popen(argv, **kwargs):
        seen["argv"], seen["env"] = argv, kwargs.get("env") or {}
        return FakeProcess()

    monkeypatch.setattr(jobs_queue.subprocess, "Popen", fake_popen)
    monkeypatch.setenv("HOME", str(tmp_path))  # a server's run logs go to this host's data folder
    run_id = jobs_queue.submit(SPEC.replace(device="cpu"), url)
    assert PASSWORD not in " ".join(map(str, seen["argv"])) and "--db" not in seen["argv"]
    assert seen["env"]["DASHBENCH_DB"] == url
    with Store(url) as store:
        row = store.get_run(run_id)
        assert row["status"] == "running" and row["pid"] == 999999
        assert PASSWORD not in json.dumps(row, default=str)
    with jobs_queue._children_lock:
        jobs_queue._children.clear()


def _claim_as(url, host, hold, got, release):
    real = store_queue.this_host
    with Store(url) as store:
        store_queue.this_host = lambda: host  # only while the claim is made: the main thread is this host
        try:
            claim_of = store.claim_queue()
            claim = claim_of.__enter__()
        finally:
            store_queue.this_host = real
        try:
            got[host] = [run_id for run_id, _spec in claim.queued()]
            for run_id in got[host][:1]:
                claim.started(run_id, 1, "/dev/null-log")
            hold.set()
            release.wait(30)
        finally:
            claim_of.__exit__(None, None, None)


def test_a_hosts_claim_is_skipped_by_another_hosts_pump_never_waited_for_or_run_twice(pg_url):
    with Store(pg_url) as store:
        ids = [store.create_run(SPEC.replace(device="cpu"), status="queued", host=None) for _ in range(2)]
    got, held, release = {}, threading.Event(), threading.Event()
    first = threading.Thread(target=_claim_as, args=(pg_url, "host-a", held, got, release))
    first.start()
    assert held.wait(30)
    # host-b pumps while host-a still holds its claim open: the rows host-a holds are skipped.
    with Store(pg_url) as store, store.claim_queue() as claim:
        assert claim.queued() == []
    release.set()
    first.join(30)
    assert got["host-a"] == ids
    with Store(pg_url) as store, store.claim_queue() as claim:  # once host-a committed: the other is free
        assert [run_id for run_id, _spec in claim.queued()] == ids[1:]
        claim.started(ids[1], 2, "/dev/null-log")
    with Store(pg_url) as store:
        assert [store.get_run(i)["host"] for i in ids] == ["host-a", store_queue.this_host()]


def test_a_dead_hosts_claim_is_given_up_after_its_heartbeat_lapses_and_never_restarted(db_at, monkeypatch):
    monkeypatch.setenv("DASHBENCH_HEARTBEAT_LAPSE_S", "60")
    with Store(db_at) as store:
        dead = store.create_run(SPEC, status="queued", host=None)
        alive = store.create_run(SPEC, status="queued", host=None)
        for run_id, host in ((dead, "dead-host"), (alive, "live-host")):
            monkeypatch.setattr(store_queue, "this_host", lambda host=host: host)
            with store.claim_queue() as claim:  # this test's pid: alive, as either host's reconcile judges it
                claim.started(run_id, os.getpid(), "/dev/null-log")
        monkeypatch.undo()
        monkeypatch.setenv("DASHBENCH_HEARTBEAT_LAPSE_S", "60")
        assert store.reconcile() == 0  # both beat just now
        later = store_queue.now() + 45
        monkeypatch.setattr(store_queue, "now", lambda: later)
        monkeypatch.setattr(store_queue, "this_host", lambda: "live-host")
        with store.claim_queue() as claim:
            claim.beat([alive])  # live-host's pump sees its run's process
        monkeypatch.setattr(store_queue, "now", lambda: later + 30)  # 75 s after dead-host's last beat
        monkeypatch.setattr(store_queue, "this_host", lambda: "third-host")
        assert store.reconcile() == 1
        assert store.get_run(alive)["status"] == "running"
        gone = store.get_run(dead)
        assert gone["status"] == "interrupted" and "host dead-host gave no heartbeat for 60 s" in gone["error"]
        with store.claim_queue() as claim:  # given up, not handed to another host: it never runs twice
            assert claim.queued() == []
        # A run presumed dead that still reports its end is recorded as it ends.
        assert store.finish_run(dead, "done", result_for(SPEC, 10.0))


def test_a_heartbeat_lapse_that_is_not_a_number_is_one_line(db_at, monkeypatch):
    with Store(db_at) as store:
        monkeypatch.setenv("DASHBENCH_HEARTBEAT_LAPSE_S", "soon")
        with pytest.raises(
            StoreError, match="DASHBENCH_HEARTBEAT_LAPSE_S: 'soon' is not a number of seconds above 0 to 604800"
        ):
            store.reconcile()


def test_four_hosts_launch_into_one_store_while_eight_readers_list_it(pg_url):
    # bench/store_stress.py's check, shortened: bench/store_stress.py --seconds 60 runs the full minute.
    outcome = bench_scripts.load("store_stress").stress(pg_url, hosts=4, readers=8, seconds=4)
    assert outcome["errors"] == [] and outcome["claimed_twice"] == [] and outcome["never_claimed"] == []
    assert outcome["runs"] >= 4 and outcome["claims"] == outcome["runs"]  # every run claimed once
    assert outcome["lost"] == 0 and outcome["not_done"] == 0  # none lost, none left queued or running
    assert outcome["samples"] == outcome["samples_expected"] and outcome["reader_rounds"] >= 8


def test_a_real_run_launched_by_the_job_runner_lands_in_the_team_store(pg_url, tmp_path, monkeypatch):
    from fixtures.job_waits import status, wait_until

    from dashbench.core.spec import RunSpec

    url = with_password(pg_url)
    monkeypatch.setenv("HOME", str(tmp_path))  # a server's run logs go to this host's data folder
    # JAX's smallest model: the framework is not under test here, and it starts in half TensorFlow's CPU.
    spec = RunSpec(model="conv2d", image_size=8, width=4, device="cpu", backend="jax", batch_size=4, steps=4, warmup=1)
    run_id = jobs_queue.submit(spec, url)
    try:
        wait_until(url, lambda: status(url, run_id) not in ("queued", "running"), timeout=600)
    finally:
        with Store(url) as store:
            for rid in store.runs(status=["queued", "running"])["run_id"]:
                jobs_queue.cancel(rid, url, wait_s=5)
    with Store(url) as store:
        run = store.get_run(run_id)
        log = open(run["log_path"]).read()
        assert run["status"] == "done", run["error"] or log[-2000:]
        assert run["result"].examples_per_sec > 0 and len(store.samples(run_id)) == 5
        assert run["log_path"].startswith(str(tmp_path)) and PASSWORD not in log


def test_a_connection_the_server_dropped_costs_a_reconnect_not_an_error(pg_url):
    with Store(pg_url) as store, Store(pg_url, read_only=True) as reader:
        run_id = _done_run(store)
        assert reader.count_runs() == 1
        with store._write("test") as conn:  # what a server restart or a dropped SSH tunnel does
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid != pg_backend_pid()"
                " AND datname = current_database()"
            )
        assert reader.get_run(run_id)["status"] == "done" and reader.count_runs() == 1


def test_store_upgrade_brings_an_old_file_to_the_head_and_refuses_a_newer_store(db_at, tmp_path, capsys):
    import sqlite3

    from dashbench.cli import main

    if not on_server(db_at):  # an SQLite file of schema v8 (before heartbeats)
        Store(db_at).close()
        with sqlite3.connect(db_at) as conn:
            conn.execute("ALTER TABLE runs DROP COLUMN heartbeat_at")
            conn.execute("DROP INDEX runs_model_status")  # v10's
            conn.execute("PRAGMA user_version = 8")
    assert main(["store", "upgrade", "--db", str(db_at)]) == 0
    out = capsys.readouterr().out
    assert f"schema v{schema.SCHEMA_VERSION}" in out
    with Store(db_at, read_only=True) as store:
        assert store.schema_version == schema.SCHEMA_VERSION
    with Store(db_at) as store, store._write("test") as conn:
        conn.execute("UPDATE dashbench_schema SET version = 99" if on_server(db_at) else "PRAGMA user_version = 99")
    assert main(["store", "upgrade", "--db", str(db_at)]) == 2
    err = capsys.readouterr().err
    assert "schema v99, newer than this dashbench" in err and len(err.strip().splitlines()) == 1


def test_the_next_store_on_a_server_reuses_a_pooled_connection_and_idle_ones_stay_few(pg_url, pg_server):
    from dashbench.store.postgres import server as postgres

    def backend_pid(store):
        return store._read("SELECT pg_backend_pid()")[0][0]

    Store(pg_url).close()  # makes the new database a store
    with Store(pg_url, read_only=True) as first:
        pid = backend_pid(first)
    with Store(pg_url, read_only=True) as second:  # a dashboard's next script run: no new connection
        assert backend_pid(second) == pid
    with pg_server.connect() as conn:  # however many stores came and went, at most KEEP_UNUSED pools idle
        for i in range(postgres.KEEP_UNUSED + 3):
            conn.execute(f'CREATE DATABASE "{pg_url.rsplit("/", 1)[1]}_{i}"')
    for i in range(postgres.KEEP_UNUSED + 3):
        Store(f"{pg_url}_{i}").close()
    with pg_server.connect() as conn:
        idle = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dashbench' AND pid != pg_backend_pid()"
        ).fetchone()[0]
        for i in range(postgres.KEEP_UNUSED + 3):
            conn.execute(f'DROP DATABASE "{pg_url.rsplit("/", 1)[1]}_{i}" WITH (FORCE)')
    assert idle <= 2 * postgres.KEEP_UNUSED


def test_a_write_that_changed_nothing_leaves_the_change_token(pg_url):
    # The writable dashboard pumps the queue on every rerun: with nothing to start it must not bump the
    # counter, or every page's cached reads would be thrown away on every rerun.
    with Store(pg_url) as store:
        run_id = store.create_run(SPEC)
        token = store.change_token()
        for _ in range(3):
            jobs_queue.pump(pg_url)
            store.reconcile()
        assert store.change_token() == token
        store.heartbeat(run_id)
        assert store.change_token() != token


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://ann@db:5432/r?password=s3cr%40t&sslmode=require",
        "postgresql+psycopg://ann:s3cr%40t@db:5432/r?sslmode=require",
    ],
)
def test_a_password_given_as_a_query_parameter_is_masked_as_well(url):
    from dashbench.store.urls import scrub

    shown = masked(url)
    assert "s3cr%40t" not in shown and "***" in shown and "sslmode=require" in shown and "ann" in shown
    assert "s3cr%40t" not in scrub(f'connection to "{url}" failed: password s3cr%40t rejected', url)
