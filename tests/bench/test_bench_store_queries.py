"""bench/store_queries.py's PostgreSQL column end to end on a tiny store: the same queries and write
path on both databases, side by side, and the database it was given left as it found it."""

import subprocess
import sys
from pathlib import Path

from fixtures.pg_server import skip_unless_the_store_takes_urls

from dashbench.store import Store

ROOT = Path(__file__).resolve().parents[2]


def test_the_postgresql_column_sits_beside_sqlites(pg_url, pg_server):
    skip_unless_the_store_takes_urls(pg_url)
    docs = (ROOT / "docs" / "PERFORMANCE.md").read_bytes()
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "store_queries.py"),
            "--runs",
            "60",
            "--samples",
            "2",
            "--write-runs",
            "3",
            "--write-samples",
            "20",
            "--pg-url",
            pg_url,
            "--no-docs",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| query | SQLite | PostgreSQL | PostgreSQL ÷ SQLite | rows |" in done.stdout
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| ")]
    by_name = {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}
    assert by_name["ALL 60 runs as a DataFrame"][3] == "60"
    assert by_name["one sweep (5 runs)"][1].endswith(" ms") and by_name["one sweep (5 runs)"][3] == "5"
    assert by_name["a run of 20 samples committed one at a time"][3] == "3 runs"
    assert by_name["a run of 20 samples committed 100 at a time"][1].endswith(" ms per run")
    assert by_name["bulk import (import_rows, as store copy), 4 samples a run"][3] == "60 runs"
    # Where a one-sample commit's time goes: the client's CPU, and a bare INSERT with no store code.
    assert by_name["this process's CPU for a one-sample commit (on a server: the client's share)"][3] == "200 commits"
    floor = by_name["one bare INSERT committed alone, by the driver (the floor of a commit)"]
    assert floor[0].endswith(" ms") and floor[1].endswith(" ms") and floor[3] == "200 commits"
    plans = done.stdout[done.stdout.index("Query plans, PostgreSQL") :]
    assert " on samples" in plans and "SEARCH" not in plans  # PostgreSQL's own EXPLAIN, not SQLite's
    assert (ROOT / "docs" / "PERFORMANCE.md").read_bytes() == docs  # --no-docs
    with Store(pg_url, read_only=True) as store:  # the filled store is in the given database
        assert store.count_runs() == 60
    with pg_server.connect() as conn:  # the write path's scratch database is gone
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database")]
    assert "dashbench_bench_inserts" not in names


def test_the_write_path_alone_takes_turns_and_writes_no_docs(pg_url):
    skip_unless_the_store_takes_urls(pg_url)
    docs = (ROOT / "docs" / "PERFORMANCE.md").read_bytes()
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "store_queries.py"),
            "--write-only",
            "2",
            "--write-runs",
            "2",
            "--write-samples",
            "5",
            "--pg-url",
            pg_url,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "median of 2 rounds; load average (1/5/15 min) " in done.stdout
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| ")]
    by_name = {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows}
    assert "| query |" not in done.stdout  # no fill, no queries
    assert by_name["a run of 5 samples committed one at a time"][3] == "2 runs"
    assert by_name["one write transaction (one sample; create, finish)"][3] == "14 commits"
    cpu = by_name["this process's CPU for a run of 5 samples committed 100 at a time"]
    assert cpu[0].endswith(" ms per run") and cpu[1].endswith(" ms per run") and cpu[3] == "2 runs"
    assert (ROOT / "docs" / "PERFORMANCE.md").read_bytes() == docs
