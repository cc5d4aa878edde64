"""A run outlives an outage of its store (jobs/store_buffer.py): a real PostgreSQL server of the test's own,
crashed as `pg_ctl -m immediate stop` does (SIGQUIT to the postmaster) mid-run and started again; a real
SQLite file whose writes fail for a while (a file-size limit on the run process, lifted later). The run is a
real JAX run process (`python -m dashbench run`), as a user starts it."""

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
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


@pytest.mark.parametrize("down_s", [5, 60])
def test_a_run_outlives_an_immediate_stop_of_its_postgres_server(pg_own_server, tmp_path, down_s):
    url = _database(pg_own_server)
    proc = _start_run(url, tmp_path)
    _until_measuring(pg_own_server, proc)
    pg_own_server.crash()
    time.sleep(down_s)
    pg_own_server.restart()
    out, err = proc.communicate(timeout=600)
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
