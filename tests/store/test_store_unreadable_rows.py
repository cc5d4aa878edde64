"""A bad row already in the store (written by hand, or by an older version) is skipped and named by
`list`, Compare and Results; it never breaks them. The rows are damaged through sqlite3 directly (on
PostgreSQL, whose typed columns refuse most of this damage, through SQL of the tests' own)."""

import json
import sqlite3
import subprocess
import sys

import pytest
from fixtures.app_test import select_rows, show, start, texts
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC, result_for

from dashbench.store import Store, unreadable_text
from dashbench.views.common import stored_runs
from dashbench.views.compare import numbers as compare
from dashbench.views.results import runs as results


def stored(tmp_path, n=3, db=None) -> tuple:
    db = db or tmp_path / "runs.sqlite"
    ids = []
    with Store(db) as store:
        for batch in range(1, n + 1):
            spec = SPEC.replace(batch_size=batch * 8)
            run_id = store.create_run(spec)
            store.add_samples(run_id, [{"index": 0, "steps": 1, "duration_s": 0.1, "loss": 1.0, "warmup": False}])
            store.finish_run(run_id, "done", result_for(spec, 100.0 * batch))
            ids.append(run_id)
    return db, ids


def damage(db, sql, params):
    if on_server(db):
        with Store(db) as store, store._write("damage a row") as conn:
            conn.execute(sql, params)
        return
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(sql, params)
    conn.close()


DAMAGE = [
    ("UPDATE runs SET examples_per_sec = 'fast' WHERE run_id = ?", "examples_per_sec: not a number ('fast')"),
    ("UPDATE runs SET batch_size = 'big' WHERE run_id = ?", "batch_size: not a whole number ('big')"),
    ("UPDATE runs SET accelerator_count = 'one' WHERE run_id = ?", "accelerator_count: not a number ('one')"),
    ("UPDATE runs SET created_at = '0001-01-01' WHERE run_id = ?", "created_at: not a time ('0001-01-01')"),
    ("UPDATE runs SET created_at = 1e300 WHERE run_id = ?", "created_at: not a time (1e+300)"),
    ("UPDATE runs SET flags_json = '[{' WHERE run_id = ?", "flags: not JSON"),
]


# What a PostgreSQL column can hold: a time out of range, text that is not JSON.
SERVER_DAMAGE = ("created_at: not a time (1e+300)", "flags: not JSON")


@pytest.mark.parametrize("sql, why", DAMAGE, ids=[d[1].split(":")[0] for d in DAMAGE])
def test_runs_skips_a_bad_row_and_names_it(tmp_path, db_at, sql, why):
    if on_server(db_at) and why not in SERVER_DAMAGE:
        pytest.skip("a typed PostgreSQL column cannot hold this value")
    db, ids = stored(tmp_path, db=db_at)
    damage(db, sql, (ids[1],))
    with Store(db, read_only=True) as store:
        runs = store.runs()
        assert sorted(runs["run_id"]) == sorted([ids[0], ids[2]])
        note = unreadable_text(runs)
        assert note.startswith(f"1 stored run could not be read: {ids[1]} ({why}")
        results.results_table(runs)
        compare.compare_frame(runs)


def test_a_result_blob_that_is_not_what_the_engine_writes_is_named_not_raised(tmp_path, db_at):
    db, ids = stored(tmp_path, db=db_at)
    result = result_for(SPEC, 100.0, flags=[{"x": 1}])
    damage(db, "UPDATE run_blobs SET result_json = ? WHERE run_id = ?", (json.dumps(result), ids[0]))
    damage(db, "UPDATE run_blobs SET result_json = '{' WHERE run_id = ?", (ids[1],))
    with Store(db, read_only=True) as store:
        first, second = store.get_run(ids[0]), store.get_run(ids[1])
    assert first["result"] is None and first["unreadable"].startswith("result.flags: must be")
    assert second["result"] is None and second["unreadable"] == "result: not JSON"
    assert stored_runs.run_detail(first)["unreadable"] == first["unreadable"]


def test_list_skips_a_bad_row_with_a_warning_and_json_stays_json(tmp_path):
    db, ids = stored(tmp_path)
    damage(db, "UPDATE runs SET examples_per_sec = 'fast' WHERE run_id = ?", (ids[1],))
    for extra in ([], ["--json"]):
        done = subprocess.run(
            [sys.executable, "-m", "dashbench", "list", "--db", str(db), *extra],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert f"warning: 1 stored run could not be read: {ids[1]} (examples_per_sec" in done.stderr
        assert ids[1] not in done.stdout and ids[0][:8] in done.stdout
    assert len(json.loads(done.stdout)) == 2


def test_results_and_compare_pages_skip_and_name_a_bad_row(tmp_path, monkeypatch):
    db, ids = stored(tmp_path)
    damage(db, "UPDATE runs SET examples_per_sec = 'fast' WHERE run_id = ?", (ids[1],))
    result = result_for(SPEC, 100.0, flags=[["nested"]])
    damage(db, "UPDATE run_blobs SET result_json = ? WHERE run_id = ?", (json.dumps(result), ids[2]))
    at = start(monkeypatch, db, read_only=True)
    for page in ("pages/results.py", "pages/compare.py"):
        show(at, page)
        assert "1 stored run could not be read" in texts(at).replace("\\", "")
    # The detail of the run whose result blob is bad: named, not a trace.
    show(at, "pages/results.py")
    select_rows(at, [ids[2]])
    assert "Part of this stored run could not be read" in texts(at).replace("\\", "")
