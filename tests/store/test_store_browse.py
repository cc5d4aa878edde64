"""The store's answers for the pages at scale: the change token their cache is keyed on, the default
choice of runs to compare, sorting and paging in SQL (real SQLite files)."""

import shutil
import sqlite3

import pytest
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)

from dashbench.core.spec import RunSpec
from dashbench.store import Store


def _run(store, model="conv2d", batch=8, label=None, eps=None):
    run_id = store.create_run(RunSpec(model=model, batch_size=batch, label=label))
    if eps is None:
        store.finish_run(run_id, "failed", error="x")
    else:
        store.finish_run(run_id, "done", result={"examples_per_sec": eps, "accelerator": "CPU", "flags": []})
    return run_id


def test_the_change_token_moves_with_every_commit_and_with_a_replaced_file(tmp_path):
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        _run(store)
        token = store.change_token()
        assert store.change_token() == token  # nothing committed: the same token
        _run(store)  # this handle's own commit counts too (the watcher is another connection)
        moved = store.change_token()
        assert moved != token
    with Store(db, read_only=True) as reader:
        assert reader.change_token() == moved
        with sqlite3.connect(db) as raw:  # any other writer, not only a Store
            raw.execute("UPDATE runs SET label = 'x'")
        assert reader.change_token() != moved
    # A database copied over this one (same name, another file): a new token, though no commit was seen.
    other = tmp_path / "other.sqlite"
    with Store(other) as store:
        _run(store)
    before = Store(db, read_only=True).change_token()
    shutil.copy(other, tmp_path / "copy.sqlite")
    (tmp_path / "copy.sqlite").replace(db)
    assert Store(db, read_only=True).change_token() != before


def test_newest_per_setup_keeps_a_sweep_and_counts_a_repeated_setup_once(db_at):
    with Store(db_at) as store:
        repeated = [_run(store, batch=32, eps=100.0 + i) for i in range(5)]
        sweep = [_run(store, batch=b, eps=50.0) for b in (16, 64, 128)]
        other = _run(store, model="bilstm", batch=32, eps=10.0)
        ids, scanned = store.newest_per_setup(status="done")
        assert ids == [other, *reversed(sweep), repeated[-1]] and scanned == 9
        assert store.newest_per_setup(limit=2, status="done")[0] == [other, sweep[-1]]
        assert store.newest_per_setup(model="conv2d", scan=3)[0] == list(reversed(sweep))
        assert store.newest_model() == "bilstm"
        assert store.known_ids([other, "nope", repeated[0]]) == [other, repeated[0]]


def test_a_to_accuracy_run_is_not_the_newer_run_of_a_throughput_runs_setup(db_at):
    with Store(db_at) as store:
        throughput = _run(store, model="fashion_mnist_cnn", batch=64, eps=400.0)
        spec = RunSpec(model="fashion_mnist_cnn", batch_size=64, data="real", data_path="/x", target_accuracy=0.9)
        target = store.create_run(spec)
        store.finish_run(target, "not_reached", result={"examples_per_sec": 61.0, "accelerator": "CPU", "flags": []})
        fixed = store.create_run(spec.replace(target_accuracy=None, epochs=2))
        store.finish_run(fixed, "done", result={"examples_per_sec": 60.0, "accelerator": "CPU", "flags": []})
        real = _run(store, model="fashion_mnist_cnn", batch=64, eps=390.0)
        # A newer throughput run still replaces the older one, a newer run to accuracy the older one.
        assert store.newest_per_setup()[0] == [real, fixed]
        assert store.newest_per_setup(status="not_reached")[0] == [target]
        assert throughput not in store.newest_per_setup(status="done")[0]


def test_newest_setups_names_the_model_of_each_setups_newest_run_in_the_statuses_asked_for(db_at):
    with Store(db_at) as store:
        done = _run(store, model="bilstm", batch=32, eps=10.0)
        _run(store, model="bilstm", batch=32)  # failed since: left out when only finished runs are asked for
        other = _run(store, model="conv2d", batch=8, eps=5.0)
        assert store.newest_setups(statuses=["done", "not_reached"]) == [(other, "conv2d"), (done, "bilstm")]
        assert store.newest_setups(statuses="done", limit=1) == [(other, "conv2d")]
        assert store.newest_setups(model="bilstm")[0][1] == "bilstm" and len(store.newest_setups()) == 3


def test_sorting_and_paging_happen_in_sql(db_at):
    with Store(db_at) as store:
        speeds = [30.0, 10.0, None, 20.0, 40.0]
        ids = [_run(store, eps=eps, label=f"run {i}") for i, eps in enumerate(speeds)]
        fastest = store.runs(order_by="examples_per_sec")["run_id"].tolist()
        assert fastest == [ids[4], ids[0], ids[3], ids[1], ids[2]]  # no figure: last either way
        assert store.runs(order_by="examples_per_sec", descending=False)["run_id"].tolist()[-1] == ids[2]
        assert store.runs(order_by="examples_per_sec", limit=2, offset=2)["run_id"].tolist() == fastest[2:4]
        assert store.runs(offset=3)["run_id"].tolist() == [ids[1], ids[0]]  # newest first, from the 4th
        assert store.count_runs(search="RUN 3") == 1
        assert store.count_runs(search="run_") == 0  # "_" typed is an underscore, not LIKE's any-character
        with pytest.raises(ValueError, match="order_by: one of"):
            store.runs(order_by="examples_per_sec; DROP TABLE runs")


def test_run_ids_are_the_ids_runs_gives_for_the_same_filters(db_at):
    with Store(db_at) as store:
        for i in range(6):
            _run(store, model="conv2d" if i % 2 else "bilstm", eps=float(i + 1), label=f"run {i}")
        for filters in (
            {},
            {"limit": 2},
            {"model": "bilstm"},
            {"search": "run 3"},
            {"status": "done", "limit": 50},
            {"model": ["conv2d"], "search": "nothing like it"},
        ):
            assert store.run_ids(**filters) == store.runs(**filters)["run_id"].tolist(), filters
        assert len(store.run_ids(limit=4)) == 4
