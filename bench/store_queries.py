"""How fast the store answers the dashboard at 100k stored runs.

Fills a fresh SQLite file with N runs (realistic spread of models, devices, precisions, batch
sizes, statuses, sweeps; each with a full result JSON and its per-loop samples), then times the
queries the views make, and the insert path a run takes. With --postgres, the same filler, queries
and write path on PostgreSQL too (a throwaway server started as the tests start theirs, or an empty
database given by --pg-url), side by side. Writes the table into docs/PERFORMANCE.md between the
`<!-- store -->` markers.

    .venv/bin/python bench/store_queries.py                # 100k runs, writes docs/PERFORMANCE.md
    .venv/bin/python bench/store_queries.py --runs 5000 --no-docs
    .venv/bin/python bench/store_queries.py --postgres     # and a PostgreSQL column (Debian's postgresql)
    .venv/bin/python bench/store_queries.py --write-only 3 # the write path alone, the two taking turns
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from docs_block import write_block  # bench/, on sys.path when a script here runs

from dashbench.core.spec import RunSpec
from dashbench.store import Store, StoreError

MODELS = ["conv2d", "fashion_mnist_cnn", "resnet50", "inception_v3", "bilstm"]
ACCELERATORS = [
    ("cpu", "CPU", 1),
    ("gpu", "V100", 1),
    ("gpu", "A100", 8),
    ("gpu", "T4", 1),
    ("tpu", "TPU v3", 8),
    ("tpu", "TPU v5e", 4),
]
PRECISIONS = ["float32", "mixed_float16", "mixed_bfloat16"]
BATCHES = [16, 32, 64, 128, 256, 512, 1024]
DOCS = Path(__file__).resolve().parent.parent / "docs" / "PERFORMANCE.md"


def fake_run(rng: random.Random, i: int, t0: float, samples: int) -> dict:
    """One ended run as Store.import_rows takes it."""
    model = rng.choice(MODELS)
    device, accelerator, count = rng.choice(ACCELERATORS)
    spec = RunSpec(
        model=model,
        batch_size=rng.choice(BATCHES),
        device=device,
        precision=rng.choice(PRECISIONS),
        steps=samples,
        label=f"label-{i % 50}",
    )
    status = rng.choices(["done", "failed", "cancelled", "interrupted"], [90, 5, 3, 2])[0]
    created = t0 + i * 30.0  # one run every 30 s: 100k runs span about five weeks
    eps = rng.uniform(100, 50000)
    result = None
    if status == "done":
        step = spec.batch_size / eps
        result = {
            "model": model,
            "unit": "sequences" if model == "bilstm" else "images",
            "device": device,
            "accelerator": accelerator,
            "accelerator_count": count,
            "device_names": [f"/device:{device}:{k}" for k in range(count)],
            "replicas": count,
            "global_batch_size": spec.batch_size,
            "per_replica_batch_size": spec.batch_size // count or 1,
            "precision": spec.precision,
            "xla": False,
            "data": "synthetic",
            "status": "done",
            "examples_per_sec": eps,
            "examples_per_sec_ci95": [eps * 0.98, eps * 1.02],
            "step_time_median_s": step,
            "step_time_p10_s": step * 0.97,
            "step_time_p90_s": step * 1.05,
            "step_time_std_s": step * 0.02,
            "samples": samples,
            "steps": samples,
            "steps_per_loop": 1,
            "compile_s": rng.uniform(1, 60),
            "flops_per_example": 1.2e10,
            "achieved_tflops": eps * 1.2e10 / 1e12,
            "peak_tflops": 125.0,
            "peak_source": "datasheet",
            "mfu": rng.uniform(0.05, 0.6),
            "flags": ["above_peak"] if rng.random() < 0.01 else [],
            "losses": [2.3 - 0.01 * k for k in range(samples + 2)],
            "placement": {"variables": ["/device:GPU:0"], "ops": ["/device:GPU:0"]},
            "env": {
                "tensorflow": "2.20.0",
                "keras": "3.15.1",
                "python": "3.11.7",
                "host": "bench-host",
                "cpu_model": "Xeon",
                "device_names": [],
                "device_count": count,
                "precision": spec.precision,
                "xla": False,
                "dashbench_version": "0.1.0",
                "git_commit": "abc1234",
                "platform": "Linux",
            },
            "spec": spec.to_dict(),
        }
    n = samples + 2 if status != "failed" else 1
    return {
        "run_id": f"bench-{i:07d}",
        "status": status,
        "spec": spec.to_dict(),
        "result": result,
        "error": "ResourceExhaustedError: OOM" if status == "failed" else None,
        "created_at": created,
        "started_at": created + 1,
        "finished_at": created + 25,
        "pid": 1000 + i % 30000,
        "host": "bench-host",
        "sweep_id": f"sweep-{i // 5}" if (i // 5) % 3 == 0 else None,
        "label": spec.label,
        "samples": [[k, 1, 0.01 + rng.random() * 1e-3, 2.3 - 0.01 * k, k < 2] for k in range(n)],
    }


def fill(path: Path | str, runs: int, samples: int, seed: int = 0) -> tuple[float, int]:
    """Seconds to store `runs` fake runs in one transaction, and how many samples they have."""
    rng = random.Random(seed)
    t0 = time.time() - runs * 30.0
    started = time.perf_counter()
    with Store(path) as store:
        counts = store.import_rows(fake_run(rng, i, t0, samples) for i in range(runs))
    return time.perf_counter() - started, counts["samples_added"]


def timed(fn, repeat: int = 7) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def measure(path: Path | str, runs: int, samples: int) -> list[tuple[str, str, str]]:
    rows = []
    with Store(path, read_only=True) as store:
        middle = f"bench-{runs // 2:07d}"
        since_week = time.time() - 7 * 86400
        queries = [
            ("newest 200 runs (Results page first view)", lambda: store.runs(limit=200)),
            (
                "filter model + device + precision",
                lambda: store.runs(model="resnet50", device="gpu", precision="mixed_float16"),
            ),
            (
                "filter model + batch size, done only",
                lambda: store.runs(model="bilstm", batch_size=[64, 128], status="done"),
            ),
            ("one sweep (5 runs)", lambda: store.runs(sweep_id=f"sweep-{runs // 30 * 3}")),
            ("last 7 days", lambda: store.runs(since=since_week)),
            ("one label (~2% of runs)", lambda: store.runs(label="label-7")),
            ("queued + running (job panel)", lambda: store.runs(status=["queued", "running"])),
            ("count by model", lambda: store.count_runs(model="conv2d")),
            ("distinct accelerators (select box)", lambda: store.distinct("accelerator")),
            ("one run's samples", lambda: store.samples(middle)),
            ("one run in full (get_run)", lambda: store.get_run(middle)),
            (f"ALL {runs:,} runs as a DataFrame", lambda: store.runs()),
        ]
        for name, fn in queries:
            seconds, out = timed(fn, repeat=3 if name.startswith("ALL") else 7)
            size = len(out) if hasattr(out, "__len__") and not isinstance(out, dict) else 1
            rows.append((name, f"{seconds * 1e3:,.1f} ms", f"{size:,}"))
    return rows


def measure_inserts(path: Path | str, runs: int = 30, samples: int = 200) -> list[tuple[str, str, str]]:
    """The write path of a real run: create, samples, finish. Committed one at a time (a run whose loops
    take 0.2 s or more: the runner commits each as it comes) and 100 at a time (the runner's batch when
    loops come faster, runner.FLUSH_EVERY_N; its last batch is written with the run's end). Mid-run
    batches go as the runner sends them: on a server without waiting for the answer, which the run's next
    write reads first (Store.add_samples(wait=False))."""
    spec = RunSpec(model="conv2d", batch_size=32, steps=samples)
    result = {"device": "cpu", "accelerator": "CPU", "examples_per_sec": 1.0, "flags": []}
    out = []
    with Store(path) as store:
        for batch in (1, 100):
            t, cpu = time.perf_counter(), time.process_time()
            for _ in range(runs):
                run_id = store.create_run(spec)
                batches = [
                    [
                        {"index": i, "steps": 1, "duration_s": 0.01, "loss": 1.0, "warmup": False}
                        for i in range(k, min(k + batch, samples))
                    ]
                    for k in range(0, samples, batch)
                ]
                last = batches.pop() if batch > 1 else None
                for given in batches:  # mid-run, as the runner sends them: not waited for on a server
                    store.add_samples(run_id, given, wait=False)
                store.finish_run(run_id, "done", result, samples=last)
            seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
            commits = runs * (-(-samples // batch) + (2 if batch == 1 else 1))
            out += [
                (
                    f"a run of {samples} samples committed {'one' if batch == 1 else batch} at a time",
                    f"{seconds / runs * 1e3:,.2f} ms per run",
                    f"{runs} runs",
                ),
                (
                    f"one write transaction ({'one sample; create, finish' if batch == 1 else f'{batch} samples; create; the end with the last {batch}'})",
                    f"{seconds / commits * 1e3:,.3f} ms",
                    f"{commits:,} commits",
                ),
            ]
        # Of the runner's batches, this process's share (on a server the rest is the server's and the wire's).
        out.append(
            (
                f"this process's CPU for a run of {samples} samples committed 100 at a time",
                f"{cpu / runs * 1e3:,.2f} ms per run",
                f"{runs} runs",
            )
        )
        # What any statement costs at least: on a server, one round trip to another process.
        seconds, _ = timed(lambda: [store.cancel_asked(run_id) for _ in range(200)])
        out.append(
            ("a read of one run's row (the floor of any statement)", f"{seconds / 200 * 1e3:,.3f} ms", "200 reads")
        )
        # Where a one-sample commit's time goes: this process's CPU for it (on a server, the client's share
        # alone), and the floor of any commit with no store code at all.
        start = time.process_time()
        for k in range(200):
            store.add_samples(run_id, [{"index": samples + k, "steps": 1, "duration_s": 0.01, "loss": 1.0}])
        out.append(
            (
                "this process's CPU for a one-sample commit (on a server: the client's share)",
                f"{(time.process_time() - start) / 200 * 1e3:,.3f} ms",
                "200 commits",
            )
        )
        out.append(bare_inserts(path, run_id, samples + 200))
    return out


def bare_inserts(path: Path | str, run_id: str, first: int, n: int = 200) -> tuple[str, str, str]:
    """The floor of a commit: one prepared INSERT of a sample row in its own transaction, by the driver
    alone (no store code, no change counter, no heartbeat)."""
    sql = "INSERT INTO samples (run_id, idx, steps, duration_s, loss, warmup) VALUES (?, ?, 1, 0.01, 1.0, 0)"
    if isinstance(path, str) and "://" in path:
        conn = _pg_connect(path)
        run = lambda k: conn.execute(sql.replace("?", "%s"), (run_id, k), prepare=True)  # noqa: E731
    else:
        conn = sqlite3.connect(path, isolation_level=None)  # autocommit: each INSERT its own transaction
        conn.execute("PRAGMA synchronous = NORMAL")  # as the Store writes (WAL, set by the Store)
        run = lambda k: conn.execute(sql, (run_id, k))  # noqa: E731
    try:
        t = time.perf_counter()
        for k in range(first, first + n):
            run(k)
        seconds = time.perf_counter() - t
    finally:
        conn.close()
    return (
        "one bare INSERT committed alone, by the driver (the floor of a commit)",
        f"{seconds / n * 1e3:,.3f} ms",
        f"{n} commits",
    )


def import_row(fill_s: float, runs: int, samples: int) -> tuple[str, str, str]:
    """The filler's bulk import (Store.import_rows, as bundle import and store copy use it), per run."""
    return (
        f"bulk import (import_rows, as store copy), {samples + 2} samples a run",
        f"{fill_s / runs * 1e3:,.3f} ms per run",
        f"{runs:,} runs",
    )


def checkpoint(path: Path) -> None:
    """Fold the WAL into the main file, so its size is the database's."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def plans(path: Path) -> list[str]:
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    out = []
    for sql in (
        "SELECT * FROM runs WHERE model = 'x' AND device = 'y' ORDER BY created_at DESC",
        "SELECT * FROM runs WHERE status = 'running' AND host = 'h'",
        "SELECT * FROM samples WHERE run_id = 'r' ORDER BY idx",
    ):
        detail = "; ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
        out.append(f"`{sql}` → {detail}")
    conn.close()
    return out


PLANNED = (
    "SELECT * FROM runs WHERE model = 'x' AND device = 'y' ORDER BY created_at DESC",
    "SELECT * FROM runs WHERE status = 'running' AND host = 'h'",
    "SELECT * FROM samples WHERE run_id = 'r' ORDER BY idx",
)


def _pg_connect(url: str):
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    return psycopg.connect(
        host=u.host, port=u.port, user=u.username, password=u.password, dbname=u.database, autocommit=True
    )


def pg_plans(url: str) -> list[str]:
    out = []
    with _pg_connect(url) as conn:
        conn.execute("ANALYZE")
        for sql in PLANNED:
            lines = [r[0].strip().lstrip("-> ") for r in conn.execute("EXPLAIN (COSTS OFF) " + sql)]
            out.append(f"`{sql}` → {'; '.join(lines)}")
    return out


def pg_size_mb(url: str) -> float:
    with _pg_connect(url) as conn:
        return conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20


@contextmanager
def postgres_databases(given: str | None):
    """(a URL for the filled store, a URL for the write path): two empty databases on a throwaway
    server (tests/fixtures/pg_server.py), or on the server of --pg-url, whose database must be empty."""
    if given:
        with _pg_connect(given) as conn:
            conn.execute('DROP DATABASE IF EXISTS "dashbench_bench_inserts"')
            conn.execute('CREATE DATABASE "dashbench_bench_inserts"')
        from sqlalchemy.engine import make_url

        try:
            yield given, make_url(given).set(database="dashbench_bench_inserts").render_as_string(hide_password=False)
        finally:
            with _pg_connect(given) as conn:
                conn.execute('DROP DATABASE IF EXISTS "dashbench_bench_inserts" WITH (FORCE)')
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from fixtures.pg_server import start_server

    server = start_server()
    try:
        with server.connect() as conn:
            conn.execute("CREATE DATABASE bench")
            conn.execute("CREATE DATABASE bench_inserts")
        yield server.url("bench"), server.url("bench_inserts")
    finally:
        server.stop()


def side_by_side(sqlite_rows: list, pg_rows: list, what: str) -> list[str]:
    lines = [f"| {what} | SQLite | PostgreSQL | PostgreSQL ÷ SQLite | rows |", "|---|---:|---:|---:|---:|"]
    for (name, lite, rows), (_, pg, _) in zip(sqlite_rows, pg_rows):
        ratio = f"{_number(pg) / _number(lite):.1f}×" if _number(lite) else "—"  # under the shown precision
        lines.append(f"| {name} | {lite} | {pg} | {ratio} | {rows} |")
    return lines


def _number(text: str) -> float:
    return float(text.split()[0].replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=20, help="measured samples per run")
    parser.add_argument("--no-docs", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="measure PostgreSQL too, on a throwaway server (Debian's postgresql installed)",
    )
    parser.add_argument("--write-runs", type=int, default=30, help="runs timed on the write path")
    parser.add_argument("--write-samples", type=int, default=200, help="samples of each run on the write path")
    parser.add_argument(
        "--pg-url",
        default=None,
        help="measure PostgreSQL on this empty database instead (postgresql+psycopg://user@host/db)",
    )
    parser.add_argument(
        "--write-only",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="only the write path, SQLite and PostgreSQL taking turns ROUNDS times (medians printed; no fill, no docs)",
    )
    args = parser.parse_args()
    if args.write_only:
        return write_only(args)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        fill_s, n_samples = fill(path, args.runs, args.samples)
        checkpoint(path)
        size_mb = path.stat().st_size / 2**20
        query_rows = measure(path, args.runs, args.samples)
        insert_rows = measure_inserts(Path(tmp) / "inserts.sqlite", args.write_runs, args.write_samples)
        insert_rows.append(import_row(fill_s, args.runs, args.samples))
        plan_lines = plans(path)
    if args.postgres or args.pg_url:
        try:
            with postgres_databases(args.pg_url) as (url, inserts_url):
                pg_fill_s, _ = fill(url, args.runs, args.samples)
                pg_mb = pg_size_mb(url)
                pg_query_rows = measure(url, args.runs, args.samples)
                pg_insert_rows = measure_inserts(inserts_url, args.write_runs, args.write_samples)
                pg_insert_rows.append(import_row(pg_fill_s, args.runs, args.samples))
                pg_plan_lines = pg_plans(url)
        except (StoreError, RuntimeError) as exc:  # no server here (pg_server.Unavailable), or a refused URL
            print(f"error: postgres: {exc}", file=sys.stderr)
            return 2
        text = postgres_text(
            args,
            load,
            n_samples,
            (fill_s, size_mb, query_rows, insert_rows, plan_lines),
            (pg_fill_s, pg_mb, pg_query_rows, pg_insert_rows, pg_plan_lines),
        )
        print(text)
        if not args.no_docs:
            write_block(DOCS, "store", text)
            print(f"\nwritten to {DOCS}", file=sys.stderr)
        return 0
    cpu = platform.processor() or platform.machine()
    lines = [
        "## Store (SQLite) at scale",
        "",
        f"`bench/store_queries.py`: {args.runs:,} runs ({n_samples:,} samples) in one file of {size_mb:,.0f} MiB, "
        f"filled in {fill_s:.1f} s (one transaction). Machine: {os.cpu_count()} CPU cores ({cpu}), "
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}; median of 7 tries (3 for the full table), "
        f"read-only handle, warm page cache, measured {time.strftime('%Y-%m-%d')} "
        f"(load average {load:.1f} at the start: the machine was shared, so read these as upper bounds).",
        "",
        "| query | time | rows |",
        "|---|---:|---:|",
        *[f"| {a} | {b} | {c} |" for a, b, c in query_rows],
        "",
        "| write path | time | of |",
        "|---|---:|---:|",
        *[f"| {a} | {b} | {c} |" for a, b, c in insert_rows],
        "",
        "Query plans (every filter is an index lookup, not a table scan):",
        "",
        *[f"- {line}" for line in plan_lines],
        "",
        "Filtered queries cost what their matching rows cost to turn into a DataFrame; only loading every",
        "run at once grows with the store, so views page or filter first. Each sample commit costs about",
        "the time shown above (WAL, synchronous=NORMAL), which the runner pays between host loops, never",
        "inside a timed step; it batches samples when loops come faster than every 0.2 s.",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_docs:
        write_block(DOCS, "store", text)
        print(f"\nwritten to {DOCS}", file=sys.stderr)
    return 0


def write_only(args) -> int:
    """The write path alone, side by side: the two databases take turns, so load that comes and goes
    on a shared machine falls on both; each row is the median of its rounds."""
    before = os.getloadavg()
    lite_rounds, pg_rounds = [], []
    try:
        with tempfile.TemporaryDirectory() as tmp, postgres_databases(args.pg_url) as (_url, inserts_url):
            for k in range(args.write_only):
                lite_rounds.append(
                    measure_inserts(Path(tmp) / f"inserts-{k}.sqlite", args.write_runs, args.write_samples)
                )
                pg_rounds.append(measure_inserts(inserts_url, args.write_runs, args.write_samples))
    except (StoreError, RuntimeError) as exc:
        print(f"error: postgres: {exc}", file=sys.stderr)
        return 2
    after = os.getloadavg()
    print(
        f"write path, SQLite and PostgreSQL taking turns, median of {args.write_only} rounds; load average "
        f"(1/5/15 min) {' / '.join(f'{x:.2f}' for x in before)} → {' / '.join(f'{x:.2f}' for x in after)}"
    )
    print("\n".join(side_by_side(_medians(lite_rounds), _medians(pg_rounds), "write path")))
    return 0


def _medians(rounds: list[list[tuple[str, str, str]]]) -> list[tuple[str, str, str]]:
    """Each row's median over the rounds, in the first round's words and units."""
    out = []
    for rows in zip(*rounds):
        name, text, of = rows[0]
        unit = text.split(" ", 1)[1]
        digits = len(text.split()[0].partition(".")[2])
        out.append((name, f"{statistics.median(_number(r[1]) for r in rows):,.{digits}f} {unit}", of))
    return out


def postgres_text(args, load: float, n_samples: int, lite: tuple, pg: tuple) -> str:
    """The docs block with both databases side by side: the same store, queries and write path."""
    import psycopg

    (fill_s, size_mb, query_rows, insert_rows, plan_lines), (pg_fill_s, pg_mb, pg_rows, pg_inserts, pg_plans_) = (
        lite,
        pg,
    )
    cpu = platform.processor() or platform.machine()
    lines = [
        "## Store (SQLite and PostgreSQL) at scale",
        "",
        f"`bench/store_queries.py --postgres`: {args.runs:,} runs ({n_samples:,} samples), the same filler into "
        f"a SQLite file ({size_mb:,.0f} MiB, filled in {fill_s:.1f} s) and a PostgreSQL database "
        f"({pg_mb:,.0f} MiB, filled in {pg_fill_s:.1f} s; a local server started by the script, fsync off as "
        f"the tests run it, over TCP on 127.0.0.1), each filled in one transaction. Machine: {os.cpu_count()} "
        f"CPU cores ({cpu}), Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, psycopg "
        f"{psycopg.__version__}; median of 7 tries (3 for the full table), read-only handles, warm caches, "
        f"measured {time.strftime('%Y-%m-%d')} (load average {load:.1f} at the start: the machine was shared, so "
        f"read these as upper bounds).",
        "",
        *side_by_side(query_rows, pg_rows, "query"),
        "",
        *side_by_side(insert_rows, pg_inserts, "write path"),
        "",
        "Query plans, SQLite:",
        "",
        *[f"- {line}" for line in plan_lines],
        "",
        "Query plans, PostgreSQL (after ANALYZE):",
        "",
        *[f"- {line}" for line in pg_plans_],
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
