"""The store's side of the job queue: claims inside one transaction, queue positions, reconcile
sparing the caller's own children. (tests/jobs/test_jobs.py drives the same through real processes.)"""

import os
import subprocess
import sys

import pytest
from fixtures.store_backends import db_at, on_server  # noqa: F401 (db_at: a fixture, SQLite and PostgreSQL)
from fixtures.stored_runs import SPEC

from dashbench.core.spec import RunSpec
from dashbench.store import Store, StoreError, this_host


def spec_on(device: str | None) -> RunSpec:
    return RunSpec.from_dict({**SPEC.to_dict(), "device": device})


def test_a_claim_sees_this_hosts_runs_and_records_starts(db_at):
    with Store(db_at) as store:
        going = store.create_run(spec_on("gpu"))  # running here, as this process
        first = store.create_run(spec_on("cpu"), status="queued", host=None)
        second = store.create_run(spec_on("cpu"), status="queued", host=this_host())
        store.create_run(spec_on("cpu"), status="queued", host="another-host")
        broken = store.create_run(spec_on("tpu"), status="queued")
        with store.claim_queue() as claim:
            assert [s["device"] for s in claim.running_specs()] == ["gpu"]
            assert [(run_id, s["device"]) for run_id, s in claim.queued()] == [
                (first, "cpu"),
                (second, "cpu"),
                (broken, "tpu"),
            ]
            claim.started(first, 4242, "/logs/first.log")
            claim.failed_to_start(broken, "could not start the run process: no python")
            with pytest.raises(StoreError, match="no longer queued"):
                claim.started(going, 1, "x.log")
        run = store.get_run(first)
        assert (run["status"], run["pid"], run["host"], run["log_path"], run["phase"]) == (
            "running",
            4242,
            this_host(),
            "/logs/first.log",
            "starting",
        )
        assert run["started_at"] is not None
        failed = store.get_run(broken)
        assert failed["status"] == "failed" and failed["error"] == "could not start the run process: no python"
        assert store.get_run(going)["pid"] == os.getpid()
        with pytest.raises(StoreError, match="the queue claim is over"):
            claim.queued()


def test_a_claim_that_raises_writes_nothing(db_at):
    with Store(db_at) as store:
        queued = store.create_run(SPEC, status="queued")
        with pytest.raises(RuntimeError):
            with store.claim_queue() as claim:
                claim.started(queued, 4242, "x.log")
                raise RuntimeError("launcher broke")
        assert store.get_run(queued)["status"] == "queued"


def test_claims_and_reconcile_spare_the_callers_children(db_at):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with Store(db_at) as store:
        ours = store.create_run(SPEC, pid=dead.pid)
        asked = store.create_run(SPEC, pid=os.getpid())
        store.request_cancel(asked)
        with store.claim_queue(skip_pids={dead.pid}) as claim:
            cancels = claim.cancels_asked()
        assert store.get_run(ours)["status"] == "running"  # its launcher judges it from its exit code
        assert [c["run_id"] for c in cancels] == [asked] and cancels[0]["pid"] == os.getpid()
        assert cancels[0]["asked_at"] >= cancels[0]["started_at"] - 1
        assert store.reconcile(skip_pids={dead.pid}) == 0
        with store.claim_queue():
            pass
        assert store.get_run(ours)["status"] == "interrupted"


def test_queue_position_counts_the_runs_ahead_on_the_same_device(db_at):
    with Store(db_at) as store:
        running = store.create_run(spec_on("cpu"))
        first = store.create_run(spec_on("cpu"), status="queued")
        elsewhere = store.create_run(spec_on("gpu"), status="queued")
        anywhere = store.create_run(spec_on("auto"), status="queued")
        second = store.create_run(spec_on("cpu"), status="queued")
        assert store.queue_position(first) == 2  # behind the running one
        assert store.queue_position(elsewhere) == 1
        assert store.queue_position(second) == 4  # behind running, first and the "auto" run
        assert store.queue_position(running) is None and store.queue_position("no-such-run") is None
        store.request_cancel(first)
        assert store.queue_position(first) is None and store.queue_position(second) == 3
        assert store.queue_position(anywhere) == 1  # only runs for "auto" count ahead of one
