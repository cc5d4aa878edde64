"""What waits on a cluster run rides out an outage of its team store: the `run --cluster` that follows the
run (cli/cluster_run.py's follow) and a multi-host group's Ray driver (fleet/slices.py's writes). A real
PostgreSQL server of the test's own (tests/fixtures/pg_server.py), crashed as `pg_ctl -m immediate stop` does and
started again. Each calls the real function on a real Store: follow polls a Ray address with no such job
(launch.job_state says None, as for a job not there), so the run's row alone decides, and no cluster is
started; the group's tests call the driver's own writes, as its `_follow` makes them."""

import io
import threading
import time

import pytest

from dashbench.cli import cluster_run
from dashbench.core.spec import RunSpec
from dashbench.fleet import slices
from dashbench.store import Store, StoreUnreachable, db_line

NO_CLUSTER = "http://127.0.0.1:9"  # nothing listens: job_state is (None, None), logs ""
SPEC = RunSpec(model="conv2d", batch_size=16, image_size=8, width=4, device="cpu", backend="jax")


def _run_row(server, status: str = "running") -> tuple[str, str]:
    with server.connect() as conn:
        conn.execute("CREATE DATABASE outage")
    url = server.url("outage")
    with Store(url) as store:
        return url, store.create_run(SPEC, status=status, host="ray:tpu-host-0")


class _Meanwhile(threading.Thread):
    """function() in a thread of its own, while the test's main thread crashes and restarts the server (a
    server started again from a thread would die with it: its postmaster's parent-death signal)."""

    def __init__(self, function):
        super().__init__(daemon=True)
        self.function, self.answer, self.error = function, None, None
        self.start()

    def run(self):
        try:
            self.answer = self.function()
        except BaseException as exc:  # noqa: BLE001 (handed to the test, which asserts on it)
            self.error = exc

    def result(self, timeout: float = 120):
        self.join(timeout)
        assert not self.is_alive(), "still waiting"
        if self.error is not None:
            raise self.error
        return self.answer


def _end(url: str, run_id: str) -> None:
    with Store(url) as store:
        store.finish_run(run_id, "failed", error="worker 0 ended with exit code 1")


def test_run_cluster_waits_for_its_store_and_follows_the_run_again(pg_own_server):
    url, run_id = _run_row(pg_own_server)
    out = io.StringIO()
    following = _Meanwhile(lambda: cluster_run.follow(NO_CLUSTER, url, run_id, out=out))
    time.sleep(1)
    # Down for 4 s while follow polls (every 0.5 s), then the run ends while it is followed.
    pg_own_server.crash()
    time.sleep(4)
    pg_own_server.restart()
    time.sleep(1)
    _end(url, run_id)
    row = following.result()
    lines = out.getvalue().splitlines()
    assert row["status"] == "failed" and row["error"] == "worker 0 ended with exit code 1"
    waiting = [line for line in lines if line.startswith("waiting for the store")]
    assert len(waiting) == 1, lines
    assert "the run goes on on its node" in waiting[0] and "DASHBENCH_STORE_OUTAGE_S" in waiting[0], lines
    assert any("answers again after" in line and "following the run again" in line for line in lines), lines
    assert "Traceback" not in out.getvalue()


def test_run_cluster_past_the_outage_limit_is_one_line(pg_own_server, monkeypatch):
    monkeypatch.setenv("DASHBENCH_STORE_OUTAGE_S", "2")
    url, run_id = _run_row(pg_own_server)
    out = io.StringIO()
    following = _Meanwhile(lambda: cluster_run.follow(NO_CLUSTER, url, run_id, out=out))
    pg_own_server.crash()
    with pytest.raises(StoreUnreachable) as raised:  # the CLI's handler: `error: <db_line>`, exit 2
        following.result()
    line = db_line(raised.value)
    assert "\n" not in line and line.startswith(f"db: stopped following run {run_id}"), line
    assert "did not answer for 2 s (DASHBENCH_STORE_OUTAGE_S" in line and "the run goes on on its node" in line, line
    assert sum(text.startswith("waiting for the store") for text in out.getvalue().splitlines()) == 1


def test_a_groups_driver_writes_its_phase_and_its_end_through_an_outage(pg_own_server, capfd):
    url, run_id = _run_row(pg_own_server, status="queued")
    writes = slices.driver_writes(url)
    try:
        pg_own_server.crash()
        phase = _Meanwhile(lambda: slices._set_phase(writes, run_id, "waiting for 2 hosts together"))
        time.sleep(3)
        pg_own_server.restart()
        phase.result()
        with Store(url, read_only=True) as store:
            assert store.get_run(run_id)["phase"] == "waiting for 2 hosts together"
        # Every host's process ended well but none wrote the end: the driver's `failed`, the store down then.
        pg_own_server.crash()
        end = _Meanwhile(lambda: slices._end_unrecorded(writes, run_id))
        time.sleep(3)
        pg_own_server.restart()
        assert end.result() == 1
    finally:
        writes.store.close()
    with Store(url, read_only=True) as store:
        row = store.get_run(run_id)
    assert (row["status"], row["error"]) == ("failed", "every host's process ended without recording the run's end")
    err = capfd.readouterr().err
    assert err.count("waiting for the team store") == 2 and "Traceback" not in err, err
