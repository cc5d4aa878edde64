"""The results store on real SQLite files (and, where a test takes `db_at`, on a real PostgreSQL server too):
lifecycle, queries, migration, read-only mode, reconcile."""

import contextlib
import hashlib
import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys

import pandas as pd
import pytest
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC, result_for, samples_for

from dashbench.store import (
    ReadOnlyError,
    SchemaVersionError,
    Store,
    StoreError,
    bundle,
    default_db_path,
    migrate,
    schema,
)


def file_hash(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_default_path_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("DASHBENCH_DB", str(tmp_path / "x.sqlite"))
    assert default_db_path() == tmp_path / "x.sqlite"
    monkeypatch.delenv("DASHBENCH_DB")
    assert default_db_path().name == "dashbench.sqlite"


def test_lifecycle_done_failed_cancelled(db_at):
    with Store(db_at) as store:
        assert store.schema_version == schema.SCHEMA_VERSION
        assert on_server(db_at) or store._read("PRAGMA journal_mode")[0][0] == "wal"
        done = store.create_run(SPEC)
        row = store.get_run(done)
        assert row["status"] == "running" and row["pid"] == os.getpid() and row["started_at"]
        store.add_samples(done, samples_for(5))
        assert store.finish_run(done, "done", result=result_for(SPEC, 500.0))

        failed = store.create_run(SPEC.replace(batch_size=32))
        store.add_samples(failed, samples_for(2))
        store.finish_run(failed, "failed", error="ResourceExhaustedError: OOM")

        queued = store.create_run(SPEC.replace(precision="mixed_bfloat16"), status="queued")
        assert store.get_run(queued)["started_at"] is None
        assert store.request_cancel(queued) == "cancelled"

        runs = store.runs()
        assert list(runs["run_id"]) == [queued, failed, done]  # newest first
        by_id = runs.set_index("run_id")
        assert by_id.loc[done, "status"] == "done"
        assert by_id.loc[done, "examples_per_sec"] == 500.0
        assert by_id.loc[done, "accelerator"] == "CPU"
        assert by_id.loc[done, "flags"] == []
        assert by_id.loc[failed, "error"] == "ResourceExhaustedError: OOM"
        assert pd.isna(by_id.loc[failed, "examples_per_sec"])
        assert by_id.loc[queued, "status"] == "cancelled"
        assert runs["created_at"].dt.tz is not None

        samples = store.samples(done)
        assert list(samples.columns) == ["index", "steps", "duration_s", "loss", "warmup"]
        assert list(samples["warmup"]) == [True, False, False, False, False]
        assert samples["loss"].iloc[-1] == pytest.approx(1.9)
        assert len(store.samples(failed)) == 2

        # A run that already ended cannot be ended again (a late signal must not rewrite history).
        assert not store.finish_run(done, "cancelled")
        assert store.get_run(done)["status"] == "done"
        with pytest.raises(ValueError, match="status"):
            store.finish_run(done, "finished")


def test_filters(db_at):
    with Store(db_at) as store:
        ids = {}
        for batch in (16, 32, 64):
            for precision in ("float32", "mixed_bfloat16"):
                spec = SPEC.replace(batch_size=batch, precision=precision, label=f"b{batch}")
                run_id = store.create_run(spec, sweep_id="s1" if batch < 64 else None)
                store.finish_run(run_id, "done", result_for(spec, 100.0 * batch))
                ids[(batch, precision)] = run_id
        flagged = store.create_run(SPEC.replace(model="conv2d"))
        store.finish_run(flagged, "done", result_for(SPEC, 1e9, flags=["above_peak"], model="conv2d"))

        assert len(store.runs()) == 7
        assert set(store.runs(batch_size=32)["run_id"]) == {ids[(32, "float32")], ids[(32, "mixed_bfloat16")]}
        assert len(store.runs(precision="mixed_bfloat16", batch_size=[16, 64])) == 2
        assert len(store.runs(sweep_id="s1")) == 4
        assert len(store.runs(label="b64")) == 2
        assert store.runs(model="conv2d")["flags"].iloc[0] == ["above_peak"]
        assert len(store.runs(device="cpu", accelerator="CPU")) == 7
        assert len(store.runs(limit=3)) == 3
        assert len(store.runs(status="failed")) == 0
        assert len(store.runs(run_ids=[flagged])) == 1
        assert len(store.runs(since="2000-01-01", until=pd.Timestamp.now(tz="UTC"))) == 7
        assert len(store.runs(until="2000-01-01")) == 0
        assert store.count_runs(model="fashion_mnist_cnn") == 6
        assert store.distinct("batch_size") == [16, 32, 64]
        with pytest.raises(ValueError, match="colour: unknown filter"):
            store.runs(colour="red")
        with pytest.raises(ValueError, match="status: unknown status"):
            store.runs(status="finished")
        with pytest.raises(ValueError, match="since/until"):
            store.runs(since="last tuesday")
        assert store.resolve_run_id(flagged[:-2]) == flagged
        with pytest.raises(StoreError, match="no run"):
            store.resolve_run_id("nope")


def test_migration_from_v1_file(tmp_path):
    path = tmp_path / "old.sqlite"
    old_layout(path, 1)
    conn = sqlite3.connect(path)
    result = result_for(SPEC, 321.0, flags=["loss_not_falling"])
    conn.execute(
        "INSERT INTO runs (run_id, status, spec_json, result_json, created_at, started_at, finished_at, pid, host)"
        " VALUES ('old-run', 'done', ?, ?, 1700000000.0, 1700000001.0, 1700000100.0, 1, 'oldhost')",
        (json.dumps(SPEC.to_dict()), json.dumps(result)),
    )
    conn.execute("INSERT INTO samples VALUES ('old-run', 0, 1, 0.5, 2.0, 1), ('old-run', 1, 1, 0.25, 1.5, 0)")
    conn.commit()
    conn.close()

    before = file_hash(path)
    with pytest.raises(StoreError, match="has schema v1; open it once without read-only to upgrade it"):
        Store(path, read_only=True)
    assert file_hash(path) == before
    with Store(path) as store:
        assert store.schema_version == schema.SCHEMA_VERSION
        runs = store.runs(model="fashion_mnist_cnn", accelerator="CPU")
        assert list(runs["run_id"]) == ["old-run"]
        assert runs["examples_per_sec"].iloc[0] == 321.0
        assert runs["flags"].iloc[0] == ["loss_not_falling"]
        assert runs["backend"].iloc[0] == "tensorflow"  # v4: every run before backends ran on TensorFlow
        assert runs["created_at"].iloc[0] == pd.Timestamp(1700000000, unit="s", tz="UTC")
        assert list(store.samples("old-run")["duration_s"]) == [0.5, 0.25]
        assert store.get_run("old-run")["result"].examples_per_sec == 321.0
        assert store._read("PRAGMA foreign_key_check") == []
        assert store.price_overrides() == []  # a v3 table exists now
        # The upgraded file takes new runs like any other.
        new = store.create_run(SPEC)
        assert store.get_run(new)["status"] == "running"
    with Store(path, read_only=True) as again:
        assert again.schema_version == schema.SCHEMA_VERSION and len(again.runs()) == 2


V2_HEAD = ("run_id", "status", "created_at", "started_at", "finished_at", "pid", "host", "sweep_id", "label", "error")


def old_layout(path, version: int) -> None:
    """An empty SQLite file at schema `version` as dashbench before alembic made it (its revisions are
    the old steps: tests/store/test_store_migrations.py), without alembic's table."""
    migrate.upgrade_sqlite(path, to=version)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("DROP TABLE alembic_version")
        conn.commit()


def v3_file(path, runs) -> None:
    """A database as dashbench wrote it at schema v3 (before backends), holding `runs`:
    (run_id, status, spec dict, result JSON text or None)."""
    old_layout(path, 3)
    conn = sqlite3.connect(path)
    v2_columns = [*V2_HEAD, *schema.FLAT_COLUMNS]  # the v2 layout's columns, in order
    for i, (run_id, status, spec, result_json) in enumerate(runs):
        try:
            result = json.loads(result_json) if result_json else None
        except ValueError:
            result = None
        flat = schema.flat_values(spec, result)
        row = {
            "run_id": run_id,
            "status": status,
            "created_at": 1700000000.0 + i,
            "started_at": None,
            "finished_at": None,
            "pid": None,
            "host": "oldhost",
            "sweep_id": None,
            "label": None,
            "error": None,
            **{name: flat[name] for name in schema.FLAT_COLUMNS},
        }
        conn.execute(
            f"INSERT INTO runs ({', '.join(v2_columns)}) VALUES ({','.join('?' * len(v2_columns))})",
            [row[c] for c in v2_columns],
        )
        conn.execute("INSERT INTO run_blobs VALUES (?, ?, ?)", (run_id, json.dumps(spec), result_json))
    conn.commit()
    conn.close()


def migrate_file(path, version: int) -> None:
    """Take a v3_file up to schema `version` with the migrations that got it there."""
    old_layout(path, version)


def test_migration_v3_to_v4_fills_backend_and_its_version(tmp_path):
    path = tmp_path / "v3.sqlite"
    old_spec = {k: v for k, v in SPEC.to_dict().items() if k != "backend"}  # written before backends
    tf_result = result_for(SPEC, 100.0, env={"tensorflow": "2.17.0", "keras": "3.5.0"})
    jax_spec = SPEC.replace(backend="jax").to_dict()
    jax_result = result_for(
        SPEC.replace(backend="jax"),
        200.0,
        backend="jax",
        backend_version="0.4.30",
        env={"tensorflow": "2.17.0", "jax": "0.4.30"},
    )
    v3_file(
        path,
        [
            ("tf-old", "done", old_spec, json.dumps(tf_result)),
            ("tf-no-env", "done", old_spec, json.dumps(result_for(SPEC, 50.0, env={}))),
            ("jax-done", "done", jax_spec, json.dumps(jax_result)),
            ("jax-queued", "queued", jax_spec, None),
            ("damaged", "done", jax_spec, "{not json"),
        ],
    )
    with Store(path) as store:
        assert store.schema_version == schema.SCHEMA_VERSION >= 4
        by_id = store.runs().set_index("run_id")
        assert by_id.loc["tf-old", "backend"] == "tensorflow"
        assert by_id.loc["tf-old", "backend_version"] == "2.17.0"
        assert by_id.loc["tf-no-env", "backend"] == "tensorflow" and pd.isna(by_id.loc["tf-no-env", "backend_version"])
        assert by_id.loc["jax-done", "backend"] == "jax" and by_id.loc["jax-done", "backend_version"] == "0.4.30"
        assert by_id.loc["jax-queued", "backend"] == "jax" and pd.isna(by_id.loc["jax-queued", "backend_version"])
        assert by_id.loc["damaged", "backend"] == "jax"  # from the spec when the result cannot be read
        assert set(store.runs(backend="jax")["run_id"]) == {"jax-done", "jax-queued", "damaged"}
        assert set(store.runs(backend="tensorflow")["run_id"]) == {"tf-old", "tf-no-env"}
        assert store.distinct("backend") == ["jax", "tensorflow"]
        indexes = {name for (name,) in store._read("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "runs_backend" in indexes
        # The upgraded file stores a new run's backend version from its result.
        new = store.create_run(SPEC)
        store.finish_run(new, "done", result_for(SPEC, 10.0, backend="tensorflow", backend_version="2.19.1"))
        assert store.runs(run_ids=[new])["backend_version"].iloc[0] == "2.19.1"


def test_new_runs_store_backend_from_spec_then_result(db_at):
    with Store(db_at) as store:
        queued = store.create_run(SPEC.replace(backend="jax"), status="queued")
        assert store.runs(run_ids=[queued])["backend"].iloc[0] == "jax"
        running = store.create_run(SPEC.replace(backend="jax"))
        store.finish_run(
            running,
            "done",
            result_for(SPEC.replace(backend="jax"), 10.0, backend="jax", backend_version="0.10.2", xla=True),
        )
        plain = store.create_run(SPEC)
        store.finish_run(plain, "done", result_for(SPEC, 10.0, env={"tensorflow": "2.19.1"}))
        by_id = store.runs().set_index("run_id")
        assert by_id.loc[running, ["backend", "backend_version"]].tolist() == ["jax", "0.10.2"]
        assert by_id.loc[plain, ["backend", "backend_version"]].tolist() == ["tensorflow", "2.19.1"]
        # XLA as it ran: a JAX run compiles with XLA though its spec did not ask for it.
        assert bool(by_id.loc[running, "xla"]) and not bool(by_id.loc[plain, "xla"]) and not SPEC.xla
        assert store.count_runs(backend="jax") == 2 and store.count_runs(backend=["tensorflow"]) == 1


def test_newer_schema_is_refused_and_file_untouched(tmp_path):
    path = tmp_path / "future.sqlite"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    before = file_hash(path)
    for read_only in (False, True):
        with pytest.raises(SchemaVersionError, match="schema v99, newer than this dashbench"):
            Store(path, read_only=read_only)
    assert file_hash(path) == before


def test_foreign_files_are_refused(tmp_path):
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a dashbench database"):
        Store(other)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreError, match="cannot read database"):
        Store(junk)
    with pytest.raises(StoreError, match="no database at"):
        Store(tmp_path / "missing.sqlite", read_only=True)
    assert not (tmp_path / "missing.sqlite").exists()


def test_read_only_refuses_every_write_and_leaves_bytes_unchanged(tmp_path):
    path = tmp_path / "r.sqlite"
    with Store(path) as store:
        run_id = store.create_run(SPEC)
        store.add_samples(run_id, samples_for(3))
        store.finish_run(run_id, "done", result_for(SPEC, 10.0))
        queued = store.create_run(SPEC, status="queued")
        store.set_price_override({"key": "x", "device": "CPU", "unit": "hour", "on_demand_usd_per_hour": 1.0})
    before = file_hash(path)
    bundle_path = tmp_path / "b.json"
    with Store(path) as writer_side:
        bundle.export_bundle(writer_side, bundle_path)
    assert file_hash(path) == before

    with Store(path, read_only=True) as ro:
        assert len(ro.runs()) == 2 and len(ro.samples(run_id)) == 3
        assert ro.get_run(run_id)["status"] == "done"
        assert ro.price_overrides()[0]["key"] == "x"
        bundle.export_bundle(ro, tmp_path / "b2.json")  # reading out is allowed
        writes = {
            "create_run": lambda: ro.create_run(SPEC),
            "start_run": lambda: ro.start_run(queued, 1),
            "add_samples": lambda: ro.add_samples(run_id, samples_for(1)),
            "set_phase": lambda: ro.set_phase(run_id, "measure"),
            "finish_run": lambda: ro.finish_run(queued, "failed"),
            "request_cancel": lambda: ro.request_cancel(queued),
            "finish_unreported": lambda: ro.finish_unreported(queued, "failed", "exit code 1"),
            "reconcile": ro.reconcile,
            "claim_queue": lambda: ro.claim_queue().__enter__(),
            "import_rows": lambda: ro.import_rows([]),
            "delete_runs": lambda: ro.delete_runs([run_id]),
            "import_bundles": lambda: bundle.import_bundles(ro, [bundle_path]),
            "set_price_override": lambda: ro.set_price_override({"key": "y", "device": "CPU", "unit": "hour"}),
            "delete_price_override": lambda: ro.delete_price_override("x"),
            "reset_price_overrides": ro.reset_price_overrides,
        }
        for _name, call in writes.items():
            with pytest.raises(ReadOnlyError, match="open read-only"):
                call()
        # Even a write that slips past the API is refused by SQLite itself.
        with pytest.raises(sqlite3.OperationalError):
            ro._db.conn.execute("DELETE FROM runs")
        assert len(ro.runs()) == 2
    assert file_hash(path) == before


def test_reconcile_marks_dead_processes_interrupted(db_at):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with Store(db_at) as store:
        alive = store.create_run(SPEC)  # this test's own pid: alive
        gone = store.create_run(SPEC, pid=dead.pid)
        store.add_samples(gone, samples_for(2))
        elsewhere = store.create_run(SPEC, pid=dead.pid, host="another-host")
        asked = store.create_run(SPEC, pid=dead.pid)
        store.request_cancel(asked)
        assert store.reconcile() == 2
        status = dict(zip(store.runs()["run_id"], store.runs()["status"]))
        assert status == {alive: "running", gone: "interrupted", elsewhere: "running", asked: "cancelled"}
        assert "ended without recording a result" in store.get_run(gone)["error"]
        assert len(store.samples(gone)) == 2  # what was measured stays
        assert store.reconcile() == 0


def test_delete_runs_removes_samples(db_at):
    with Store(db_at) as store:
        keep, drop = store.create_run(SPEC), store.create_run(SPEC)
        store.add_samples(keep, samples_for(2))
        store.add_samples(drop, samples_for(3))
        assert store.delete_runs([drop, "no-such-run"]) == 1
        assert list(store.runs()["run_id"]) == [keep]
        assert store._read("SELECT count(*) FROM samples")[0][0] == 2


def test_price_overrides(db_at):
    with Store(db_at) as store:
        row = {
            "key": "gcp-tpu-v4",
            "device": "TPU v4",
            "provider": "GCP",
            "unit": "chip-hour",
            "chips_per_unit": 1,
            "on_demand_usd_per_hour": 3.0,
            "spot_usd_per_hour": 0.9,
            "region": "us-central2",
            "source": "my invoice",
            "as_of": "2025-06-01",
            "unconfirmed": False,
        }
        store.set_price_override(row)
        store.set_price_override({**row, "on_demand_usd_per_hour": 2.5})  # same key: replaced
        store.set_price_override({"key": "b", "device": "T4", "unit": "GPU-hour", "unconfirmed": True})
        rows = store.price_overrides()
        assert [r["key"] for r in rows] == ["b", "gcp-tpu-v4"]
        assert rows[1]["on_demand_usd_per_hour"] == 2.5 and rows[1]["origin"] == "override"
        assert rows[0]["unconfirmed"] is True
        with pytest.raises(ValueError, match="colour: unknown price column"):
            store.set_price_override({**row, "colour": "red"})
        with pytest.raises(ValueError, match="unit: is required"):
            store.set_price_override({"key": "c", "device": "T4"})
        assert store.delete_price_override("b") and not store.delete_price_override("b")
        assert store.reset_price_overrides() == 1 and store.price_overrides() == []


def _writer(path, n, tag, errors):
    try:
        with Store(path) as store:
            for i in range(n):
                run_id = store.create_run(SPEC.replace(label=tag))
                store.add_samples(run_id, samples_for(4))
                store.finish_run(run_id, "done", result_for(SPEC, 100.0 + i))
    except Exception as exc:  # reported to the parent; the test fails on any error
        errors.put(f"writer {tag}: {exc!r}")


def _reader(path, n, errors):
    try:
        with Store(path, read_only=True) as store:
            for _ in range(n):
                runs = store.runs(status="done")
                if len(runs):
                    store.samples(runs["run_id"].iloc[0])
                store.runs(label="w1", limit=10)
    except Exception as exc:
        errors.put(f"reader: {exc!r}")


def test_writers_and_readers_at_once_never_see_locked(db_at):
    path = db_at
    Store(path).close()
    ctx = multiprocessing.get_context("fork")
    errors = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, 60, f"w{i}", errors)) for i in range(2)]
    procs += [ctx.Process(target=_reader, args=(path, 60, errors)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    problems = []
    while not errors.empty():
        problems.append(errors.get())
    assert problems == []
    assert [p.exitcode for p in procs] == [0] * len(procs)
    with Store(path, read_only=True) as store:
        assert store.count_runs(status="done") == 120
        assert store._read("SELECT count(*) FROM samples")[0][0] == 480


def test_connections_opening_a_new_database_together_all_get_it(tmp_path):
    """A sweep creating its database while a page or a test opens it (here: threads, each with its
    own connection): each opener must see either no schema or the whole one, and wait out the
    others' switch to WAL (it failed about one new file in ten with 'not a dashbench database'
    or 'database is locked')."""
    import threading

    problems = []
    for i in range(40):
        path = tmp_path / f"new{i}.sqlite"
        start = threading.Barrier(4)

        def open_it(start=start, path=path):
            start.wait()
            try:
                Store(path).close()
            except StoreError as exc:
                problems.append(str(exc))

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        with Store(path, read_only=True) as store:
            assert store.schema_version == schema.SCHEMA_VERSION
    assert problems == []


def test_read_only_opens_a_wal_file_whose_folder_cannot_be_written(tmp_path):
    """A results file on a read-only mount: SQLite cannot create the -shm index next to it.
    A dangling -shm symlink fails the same way, even for root."""
    path = tmp_path / "served.sqlite"
    with Store(path) as store:
        run_id = store.create_run(SPEC)
        store.add_samples(run_id, samples_for(3))
        store.finish_run(run_id, "done", result_for(SPEC, 10.0))
    assert not (tmp_path / "served.sqlite-wal").exists()  # checkpointed on close
    (tmp_path / "served.sqlite-shm").symlink_to(tmp_path / "missing-folder" / "shm")
    before = file_hash(path)
    with Store(path, read_only=True) as ro:
        assert ro.get_run(run_id)["status"] == "done" and len(ro.samples(run_id)) == 3
    assert file_hash(path) == before
    # Writing is still refused, with a hint at the cause rather than a bare SQLite message.
    with pytest.raises(StoreError, match="read-only"):
        Store(path).create_run(SPEC)


def test_migration_to_v5_fills_shape_overrides(tmp_path):
    """A v4 file gains the spec's shape overrides as columns (NULL: full size), for runs already stored
    and for new ones."""
    path = tmp_path / "v4.sqlite"
    quick = SPEC.replace(width=8, image_size=28).to_dict()
    v3_file(
        path,
        [
            ("full", "done", SPEC.to_dict(), None),
            ("quick", "done", quick, None),
            ("damaged", "queued", SPEC.to_dict(), None),
        ],
    )
    migrate_file(path, 4)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE run_blobs SET spec_json = '{not json' WHERE run_id = 'damaged'")
    with Store(path) as store:
        assert store.schema_version == schema.SCHEMA_VERSION >= 5
        by_id = store.runs().set_index("run_id")
        assert by_id.loc["quick", "width"] == 8 and by_id.loc["quick", "image_size"] == 28
        assert pd.isna(by_id.loc["quick", "seq_len"])
        assert by_id.loc[["full", "damaged"], ["image_size", "seq_len", "width"]].isna().all().all()
        new = store.create_run(SPEC.replace(width=4))
        assert store.runs(run_ids=[new])["width"].iloc[0] == 4


def test_migration_to_v7_fills_the_hosts_cpu_count(tmp_path):
    """A v6 file gains host_cpus (what a CPU run is priced by) from each stored result's environment;
    a result without one, or a damaged one, leaves it empty."""
    path = tmp_path / "v6.sqlite"
    with_env = json.dumps(result_for(SPEC, 100.0, env={"host": "h", "cpu_count": 16}))
    v3_file(
        path,
        [
            ("sixteen", "done", SPEC.to_dict(), with_env),
            ("queued", "queued", SPEC.to_dict(), None),
            ("damaged", "done", SPEC.to_dict(), "{not json"),
        ],
    )
    migrate_file(path, 6)
    with Store(path) as store:
        assert store.schema_version == schema.SCHEMA_VERSION >= 7
        by_id = store.runs().set_index("run_id")
        assert by_id.loc["sixteen", "host_cpus"] == 16
        assert by_id.loc[["queued", "damaged"], "host_cpus"].isna().all()
        new = store.create_run(SPEC)
        store.finish_run(new, "done", result=result_for(SPEC, 50.0, env={"cpu_count": 2}))
        assert store.runs(run_ids=[new])["host_cpus"].iloc[0] == 2
