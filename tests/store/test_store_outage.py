"""A run outlives an outage of its store (jobs/store_buffer.py): a real PostgreSQL server of the test's own,
crashed as `pg_ctl -m immediate stop` does (SIGQUIT to the postmaster) mid-run and started again; a real
SQLite file whose writes fail for a while (a file-size limit on the run process, lifted later). The run is a
real JAX run process (`python -m dashbench run`), as a user starts it."""

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fixtures.pg_server import Unavailable, start_server
from fixtures.xla import FAST_XLA_COMPILE

from dashbench.store import Store

# ~4,000 samples over ~10 s of measuring on this machine: the outage falls while it measures.
LONG_RUN = [
    "--model",
    "conv2d",
    "--backend",
    "jax",
    "--batch-size",
    "4",
    "--image-size",
    "8",
    "--width",
    "4",
    "--device",
    "cpu",
    "--steps",
    "40000",
    "--steps-per-loop",
    "10",
    "--warmup",
    "10",
]
SAMPLES = 1 + 40000 // 10  # one warm-up loop and the measured ones


def _start_run(db: str, home: Path, run: list[str] = LONG_RUN, **env) -> subprocess.Popen:
    environment = {**os.environ, "XLA_FLAGS": FAST_XLA_COMPILE, "HOME": str(home), **env}
    return subprocess.Popen(
        [sys.executable, "-m", "dashbench", "run", "--db", db, *run, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def _database(server) -> str:
    with server.connect() as conn:
        conn.execute("CREATE DATABASE outage")
    return server.url("outage")


def _until_measuring(server, proc, count: int = 20) -> None:
    """Until the run has stored `count` samples (it is measuring), asked straight of the server."""
    while proc.poll() is None:
        try:
            with server.connect("outage") as conn:
                if conn.execute("SELECT count(*) FROM samples").fetchone()[0] >= count:
                    return
        except Exception:  # the schema not made yet
            pass
        time.sleep(0.2)
    pytest.fail(f"the run ended before it measured: {proc.communicate()[1][-3000:]}")


def _stderr_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if not line.startswith(("  step", "  warm-up"))]


class MinuteOutage:
    """The 60 s outage: its run started, its server crashed once the run measures and started again 60 s later,
    all in a thread, so the module's other tests run inside that minute instead of after it."""

    def __init__(self, server, home: Path, locks: Path):
        self.server, self.url, self.error = server, _database(server), None
        # Made before the function-scoped autouse fixtures of tests/conftest.py: their settings, given here.
        self.proc = _start_run(self.url, home, DASHBENCH_CPU_PROBE_SIZE="512", DASHBENCH_LOCK_DIR=str(locks))
        self.cancelled, self.restarted = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._outage, daemon=True)
        self.thread.start()
        # Its output read as it comes, as a terminal does: the run never waits on a full pipe.
        self.output: tuple[str, str] | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        self.output = self.proc.communicate()

    def _outage(self) -> None:
        try:
            _until_measuring(self.server, self.proc)
            self.server.crash()
            if not self.cancelled.wait(MINUTE_S):
                self.server.restart()
        except BaseException as exc:  # raised by the test that waits for it
            self.error = exc
        self.restarted.set()
        # The server dies with the thread that started it (PR_SET_PDEATHSIG is per thread): kept to the end.
        self.cancelled.wait()

    def end(self) -> None:
        self.cancelled.set()
        self.thread.join(timeout=120)
        if self.proc.poll() is None:
            self.proc.kill()
        self.reader.join(timeout=60)
        self.server.stop()


MINUTE_S = 60
MINUTE_TEST = "test_a_run_outlives_a_60_s_immediate_stop_of_its_postgres_server"
# One worker runs the module (its minute begins with the first test that worker runs here).
pytestmark = pytest.mark.xdist_group("store_outage")


@pytest.fixture(scope="module", autouse=True)
def minute_outage(request, tmp_path_factory):
    """Begun with the module's first test when the minute's test is among those run; that test is last."""
    if not any(item.name == MINUTE_TEST for item in request.session.items):
        yield None
        return
    try:
        server = start_server(durable=True)
    except Unavailable as exc:
        yield exc  # the minute's test skips, or fails in CI, as pg_own_server's do
        return
    outage = MinuteOutage(server, tmp_path_factory.mktemp("minute"), tmp_path_factory.mktemp("minute-locks"))
    yield outage
    outage.end()


def test_a_run_outlives_an_immediate_stop_of_its_postgres_server(pg_own_server, tmp_path):
    url = _database(pg_own_server)
    proc = _start_run(url, tmp_path)
    _until_measuring(pg_own_server, proc)
    pg_own_server.crash()
    time.sleep(5)
    pg_own_server.restart()
    out, err = proc.communicate(timeout=600)
    _assert_outlived(url, proc, out, err, 5)


def _assert_outlived(url: str, proc: subprocess.Popen, out: str, err: str, down_s: float) -> None:
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    said = _stderr_lines(err)
    assert any(line.startswith("warning: the team store") and "is unreachable" in line for line in said), said
    assert any("answers again after" in line and "nothing lost" in line for line in said), said
    run_id = json.loads(out)["run_id"]
    with Store(url, read_only=True) as store:
        row = store.get_run(run_id)
        samples = store.samples(run_id)
    assert row["status"] == "done", row["error"]
    assert sorted(samples["index"]) == list(range(SAMPLES))  # every sample, once
    outage = row["result"].store_outage
    assert outage["outages"] == 1 and outage["seconds"] >= down_s, outage
    assert "store_outage" in row["result"].flags
    assert f"the team store was unreachable for {outage['seconds']:.1f} s; nothing lost" in outage["text"]
    shown = subprocess.run(
        [sys.executable, "-m", "dashbench", "show", run_id, "--db", url, "--read-only"], capture_output=True, text=True
    )
    assert "the team store was unreachable for" in shown.stdout, shown.stdout + shown.stderr


def test_past_the_outage_limit_a_run_ends_in_one_line_and_a_bundle_that_imports_back(pg_own_server, tmp_path):
    url = _database(pg_own_server)
    # Steps enough that no machine ends the run inside the 3 s: a run that measured everything before the
    # limit is rightly "done", and this test is about the one the limit ends.
    at = LONG_RUN.index("--steps") + 1
    endless = LONG_RUN[:at] + ["900000"] + LONG_RUN[at + 1 :]
    proc = _start_run(url, tmp_path, endless, DASHBENCH_STORE_OUTAGE_S="3")
    _until_measuring(pg_own_server, proc)
    pg_own_server.crash()
    out, err = proc.communicate(timeout=600)  # the server stays down until the run has ended
    errors = [line for line in _stderr_lines(err) if line.startswith("error:")]
    assert proc.returncode == 1, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert len(errors) == 1 and "was unreachable for 3 s (DASHBENCH_STORE_OUTAGE_S" in errors[0], errors
    bundles = list((tmp_path / ".local" / "share" / "dashbench" / "unsent").glob("*.json"))
    assert len(bundles) == 1 and str(bundles[0]) in errors[0], (bundles, errors)
    run_id = json.loads(out)["run_id"]
    pg_own_server.restart()
    imported = subprocess.run(
        [sys.executable, "-m", "dashbench", "import", str(bundles[0]), "--db", url], capture_output=True, text=True
    )
    assert imported.returncode == 0, imported.stderr
    assert "1 stored without an end, completed" in imported.stdout, imported.stdout
    with Store(url, read_only=True) as store:
        row = store.get_run(run_id)
        indexes = sorted(store.samples(run_id)["index"])
    measured = json.loads(bundles[0].read_text())["runs"][0]["samples"]
    assert row["status"] == "interrupted" and "was unreachable for 3 s" in row["error"]
    assert indexes == list(range(len(measured))) and len(measured) > 20  # whole: every sample it measured


def test_a_sweep_waits_out_its_stores_outage_and_goes_on(pg_own_server, tmp_path):
    """The sweep's own polls meet the outage too (its queue pump, its reads): it waits and goes on, its
    queued point stays queued and starts after, the measuring one rides it out in its own process."""
    url = _database(pg_own_server)
    env = {**os.environ, "XLA_FLAGS": FAST_XLA_COMPILE, "HOME": str(tmp_path)}
    at = LONG_RUN.index("--batch-size")
    sweep = LONG_RUN[:at] + LONG_RUN[at + 2 :]
    proc = subprocess.Popen(
        [sys.executable, "-m", "dashbench", "sweep", "--db", url, *sweep, "--batch-sizes", "4,8", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    _until_measuring(pg_own_server, proc)
    pg_own_server.crash()
    time.sleep(5)
    pg_own_server.restart()
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    said = _stderr_lines(err)
    assert any(line.startswith("waiting for the store") for line in said), said
    points = json.loads(out)["points"]
    assert [p["status"] for p in points] == ["done", "done"], points
    with Store(url, read_only=True) as store:
        for point in points:
            assert sorted(store.samples(point["run_id"])["index"]) == list(range(SAMPLES))


@pytest.mark.parametrize(
    "outage, lapse, limit", [(None, None, 600.0), ("1200", None, 780.0), ("30", "900", 30.0), (None, "9", 3.0)]
)
def test_a_run_gives_up_on_its_store_before_any_host_may_presume_it_dead(monkeypatch, outage, lapse, limit):
    """The outage limit is held under the heartbeat lapse less two beats (the run cannot beat while its store
    is away), so another host never gives up the claim of a run that is still waiting for the store."""
    from dashbench.jobs import run_guard, store_buffer

    for name, value in (("DASHBENCH_STORE_OUTAGE_S", outage), ("DASHBENCH_HEARTBEAT_LAPSE_S", lapse)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert store_buffer.limit_s(run_guard.beat_every_s()) == limit


def test_a_run_on_sqlite_outlives_a_full_disk_that_frees_up(tmp_path):
    """The run process's files may not grow for a while (RLIMIT_FSIZE lowered under it, then lifted: SQLite's
    writes fail as on a full disk, SQLITE_FULL or SQLITE_IOERR); the run goes on and stores everything."""
    import sqlite3

    db = tmp_path / "results.sqlite"
    proc = _start_run(str(db), tmp_path)
    while proc.poll() is None:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                if conn.execute("SELECT count(*) FROM samples").fetchone()[0] >= 20:
                    break
        except sqlite3.Error:
            pass
        time.sleep(0.2)
    files = [path for path in tmp_path.iterdir() if path.name.startswith(db.name)]
    full = max(path.stat().st_size for path in files)
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (full, resource.RLIM_INFINITY))
    time.sleep(5)
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    said = _stderr_lines(err)
    assert any(line.startswith("warning: the database file") and "is unwritable" in line for line in said), said
    run_id = json.loads(out)["run_id"]
    with Store(db, read_only=True) as store:
        row = store.get_run(run_id)
        indexes = sorted(store.samples(run_id)["index"])
    assert row["status"] == "done" and indexes == list(range(SAMPLES))
    assert "the database file was unwritable for" in row["result"].store_outage["text"]


def test_the_benchs_outage_row_shortened(pg_own_server):
    """bench/store_stress.py --outage's check, shortened (2 hosts, one bounce in 8 s): every sample stored,
    no run ended by the outage, and each host's run that met it says so."""
    from fixtures import bench_scripts

    url = _database(pg_own_server)
    outcome = bench_scripts.load("store_stress").outage(pg_own_server, url, hosts=2, seconds=8, bounces=1, down_s=1)
    assert outcome["errors"] == [] and outcome["runs"] > 0, outcome
    assert outcome["lost_samples"] == 0 and outcome["ended_by_outage"] == 0 and outcome["not_done"] == 0, outcome
    assert outcome["runs_with_outage"] >= 1, outcome


def test_a_run_outlives_a_60_s_immediate_stop_of_its_postgres_server(minute_outage):
    """As the 5 s test above, for an outage of a minute (begun by the module's fixture, last to be awaited)."""
    if isinstance(minute_outage, Unavailable):
        (pytest.fail if os.environ.get("CI") else pytest.skip)(str(minute_outage))  # as start_or_skip does
    assert minute_outage.restarted.wait(timeout=MINUTE_S + 600)
    if minute_outage.error is not None:
        raise minute_outage.error
    minute_outage.reader.join(timeout=600)
    out, err = minute_outage.output
    _assert_outlived(minute_outage.url, minute_outage.proc, out, err, MINUTE_S)
