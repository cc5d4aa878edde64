"""A run's life in its own process (jobs/run_life.py), as the CLI starts it: its spec checked once and
its store opened once in the run's thread (the guard thread keeps handles of its own), whether the
run comes from options, a stored run's id or a preset."""

import json
import threading

import pytest
from fixtures.stored_runs import SPEC, result_for

from dashbench.cli import main
from dashbench.engine import loop
from dashbench.jobs import run_life
from dashbench.results.result import RunResult
from dashbench.store import Store
from dashbench.workloads import catalog

TINY = ["--model", "conv2d", "--image-size", "8", "--width", "2", "--batch-size", "4", "--device", "cpu"]


@pytest.fixture
def counted(monkeypatch):
    """Calls of catalog.check_spec and Store openings in this (the run's main) thread, with a stand-in
    engine: what the run process does before and after the engine, not the engine's own work."""
    counts = {"check_spec": 0, "store": 0}
    real_check, real_init = catalog.check_spec, Store.__init__

    def check(spec):
        counts["check_spec"] += 1
        return real_check(spec)

    def init(self, *args, **kwargs):
        if threading.current_thread() is threading.main_thread():
            counts["store"] += 1
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(catalog, "check_spec", check)
    monkeypatch.setattr(Store, "__init__", init)
    monkeypatch.setattr(loop, "run", lambda spec, on_event=None: RunResult.from_dict(result_for(spec, 100.0)))
    return counts


def reset(counts: dict) -> dict:
    counts.update(check_spec=0, store=0)
    return counts


def test_a_run_from_options_is_checked_once_and_opens_its_store_once(tmp_path, counted, capsys):
    db = tmp_path / "runs.sqlite"
    assert main(["run", *TINY, "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"]
    assert counted == {"check_spec": 1, "store": 1}


def test_a_stored_run_opens_its_store_once_and_is_not_checked_again(tmp_path, counted, capsys):
    """The row was checked by whoever stored it (the queue); its process reads it, says its setup phase and
    records its end through the one handle."""
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        run_id = store.create_run(SPEC, status="queued")
    reset(counted)
    assert main(["run", "--run-id", run_id, "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "done"
    assert counted == {"check_spec": 0, "store": 1}
    with Store(db) as store:
        assert store.get_run(run_id)["status"] == "done"


def test_a_stored_run_refused_for_memory_ends_oom_through_the_same_handle(tmp_path, counted, capsys, monkeypatch):
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        run_id = store.create_run(SPEC.replace(batch_size=10**9), status="queued")
    reset(counted)
    assert main(["run", "--run-id", run_id, "--db", str(db), "--json"]) == 3
    assert json.loads(capsys.readouterr().out)["status"] == "oom"
    assert counted["store"] == 1
    with Store(db) as store:
        row = store.get_run(run_id)
    assert row["status"] == "oom" and row["error"].startswith("out of memory before it started: batch_size: ")


def test_a_preset_is_checked_once_where_its_spec_is_made(tmp_path, counted, capsys):
    db = tmp_path / "runs.sqlite"
    argv = ["preset", "colab-conv2d", "--device", "cpu", "--quick", "--data", "synthetic", "--db", str(db), "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["run_id"]
    assert counted == {"check_spec": 1, "store": 1}


def test_the_life_says_every_end_as_an_end_and_raises_none(tmp_path, counted, monkeypatch):
    """Bad input before the spec is known, bad input after, and a run that failed: an End each."""
    db = tmp_path / "runs.sqlite"
    end = run_life.live(run_life.Ask(run_id="nowhere", db=db))
    assert (end.status, end.code, end.field, end.spec) == ("invalid", 2, "run_id", None)

    def broken(spec, on_event=None):
        raise RuntimeError("the kernel launch failed")

    end = run_life.live(run_life.Ask(options=lambda: SPEC.replace(batch_size=10**9), db=db))
    assert (end.status, end.code, end.field, end.spec.batch_size) == ("invalid", 2, "batch_size", 10**9)
    monkeypatch.setattr(loop, "run", broken)
    end = run_life.live(run_life.Ask(options=lambda: SPEC, db=db))
    assert (end.status, end.code, end.error) == ("failed", 1, "RuntimeError: the kernel launch failed")
    with Store(db) as store:
        assert store.get_run(end.run_id)["status"] == "failed"
