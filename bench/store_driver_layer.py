"""What one code path for both databases would cost SQLite: the Store's own reads and a run's write
transaction through the raw sqlite3 connection (what the SQLite store uses) against the same SQL through
SQLAlchemy Core over the same file (its floor, `exec_driver_sql`, and `text()` with named parameters, the
way a single SQLAlchemy store would say it). Same queries, same Store code above them (its DataFrames
included): only the layer under `_read` changes. SQLite works in this process, so each call's CPU time is
taken (less moved by other processes than wall time), the layers taking turns call by call. Prints a
table; writes no file but its own tmp store.

    .venv/bin/python bench/store_driver_layer.py --runs 20000
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa
from store_queries import fill  # bench/, on sys.path when a script here runs

from dashbench.store import Store


def _medians_ms(fns, repeat: int) -> list[float]:
    """Each function's median CPU time per call, the functions called in turn `repeat` times."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            t = time.process_time()
            fn()
            times[k].append(time.process_time() - t)
    return [statistics.median(ts) * 1e3 for ts in times]


def _named(sql: str) -> tuple[str, int]:
    count = iter(range(10**6))
    return re.sub(r"\?", lambda _m: f":p{next(count)}", sql), 0


def readers(path: Path):
    """(name, read(sql, params)) for each layer, all on one read-only file."""
    uri = path.resolve().as_uri() + "?mode=ro"
    raw = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    engine = sa.create_engine(
        "sqlite://", creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False), poolclass=sa.StaticPool
    )
    conn = engine.connect()

    def raw_read(sql, params=()):
        return raw.execute(sql, list(params)).fetchall()

    def driver_sql(sql, params=()):
        return [tuple(row) for row in conn.exec_driver_sql(sql, tuple(params)).fetchall()]

    def core_text(sql, params=()):
        named, _ = _named(sql)
        binds = {f"p{k}": v for k, v in enumerate(params)}
        return [tuple(row) for row in conn.execute(sa.text(named), binds).fetchall()]

    return [("sqlite3 (today)", raw_read), ("SQLAlchemy exec_driver_sql", driver_sql), ("SQLAlchemy text()", core_text)]


def write_txn(path: Path):
    """(name, one write transaction: a sample and the run's heartbeat) per layer, on a writable copy."""
    statements = [
        (
            "INSERT OR REPLACE INTO samples (run_id, idx, steps, duration_s, loss, warmup) VALUES (?, ?, ?, ?, ?, ?)",
            ["bench-0000001", 10**6, 1, 0.01, 0.5, 0],
        ),
        ("UPDATE runs SET heartbeat_at = ? WHERE run_id = ?", [time.time(), "bench-0000001"]),
    ]
    raw = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    engine = sa.create_engine(
        "sqlite://",
        creator=lambda: sqlite3.connect(path, isolation_level=None, check_same_thread=False),
        poolclass=sa.StaticPool,
    )
    conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")

    def raw_write():
        raw.execute("BEGIN IMMEDIATE")
        for sql, params in statements:
            raw.execute(sql, params)
        raw.execute("COMMIT")

    def sa_write():
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        for sql, params in statements:
            conn.exec_driver_sql(sql, tuple(params))
        conn.exec_driver_sql("COMMIT")

    def sa_text():
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        for sql, params in statements:
            conn.execute(sa.text(_named(sql)[0]), {f"p{k}": v for k, v in enumerate(params)})
        conn.exec_driver_sql("COMMIT")

    return [("sqlite3 (today)", raw_write), ("SQLAlchemy exec_driver_sql", sa_write), ("SQLAlchemy text()", sa_text)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--tries", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        fill_s, _n = fill(path, args.runs, args.samples)
        print(
            f"{args.runs:,} runs filled in {fill_s:.1f} s; CPU ms per call, median of {args.tries} tries "
            f"(x10 for the small reads, x100 for the write)",
            file=sys.stderr,
        )
        middle = f"bench-{args.runs // 2:07d}"
        questions = [
            ("one run in full (get_run)", lambda s: s.get_run(middle)),
            ("newest 200 runs (Results page first view)", lambda s: s.runs(limit=200)),
            ("count by model", lambda s: s.count_runs(model="conv2d")),
            ("one label (~2% of runs)", lambda s: s.runs(label="label-7")),
            (f"ALL {args.runs:,} runs as a DataFrame", lambda s: s.runs()),
        ]
        table = {}
        layered = readers(path)
        with Store(path, read_only=True) as store:

            def through(read, ask):
                def call():
                    store._read = read  # the layer under the Store's reads: nothing else changes
                    ask(store)

                return call

            for name, ask in questions:
                repeat = args.tries if name.startswith("ALL") else args.tries * 10
                table[name] = _medians_ms([through(read, ask) for _layer, read in layered], repeat)
        table["one write transaction (a sample + heartbeat)"] = _medians_ms(
            [write for _layer, write in write_txn(path)], args.tries * 100
        )
        layers = [name for name, _fn in layered]
        print("| question | " + " | ".join(layers) + " |")
        print("|---|" + "---:|" * len(layers))
        for name, values in table.items():
            base = values[0]
            cells = [f"{values[0]:.3f}"] + [f"{v:.3f} ({v / base:.1f}×)" for v in values[1:]]
            print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
