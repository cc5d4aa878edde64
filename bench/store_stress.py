"""Hosts and readers on one PostgreSQL store at once: 4 processes posing as 4 hosts queue runs and claim
them (any host may take any queued run), each claimed run started, given samples and finished, while 8
reader processes list the store as the dashboard does, for a minute. Then every run is checked: none
lost, none left queued, none claimed by two hosts, no error anywhere. Writes the outcome into
docs/PERFORMANCE.md between the `<!-- store-stress -->` markers.

With --outage, the outage row instead (between `<!-- store-outage -->`): 4 processes posing as 4 hosts
write runs as a run process does (jobs/store_buffer.py: its row, batches of samples sent without waiting,
its end) while the throwaway server is crashed as `pg_ctl -m immediate stop` does and started again, twice
in the minute; then every run is checked: every sample stored, none ended by the outage.

    .venv/bin/python bench/store_stress.py --seconds 60            # a throwaway server, as the tests start theirs
    .venv/bin/python bench/store_stress.py --outage --seconds 60   # the server bounced twice meanwhile
    .venv/bin/python bench/store_stress.py --seconds 10 --no-docs --pg-url postgresql+psycopg://me@host/emptydb
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from docs_block import write_block  # bench/, on sys.path when a script here runs

from dashbench.core.spec import RunSpec
from dashbench.store import Store
from dashbench.store import queue as store_queue

DOCS = Path(__file__).resolve().parent.parent / "docs" / "PERFORMANCE.md"
SPEC = RunSpec(model="conv2d", batch_size=32, device="cpu", steps=3, warmup=1)
RESULT = {"device": "cpu", "accelerator": "CPU", "examples_per_sec": 100.0, "flags": []}
SAMPLES = [{"index": i, "steps": 1, "duration_s": 0.01, "loss": 1.0, "warmup": i == 0} for i in range(3)]


def host_process(url: str, host: str, seconds: float, out) -> None:
    """Queue a run, claim one queued run (any host's), run it (samples, end); until `seconds` pass, then
    drain the queue. Puts (host, ids queued, ids claimed, errors)."""
    queued, claimed, errors = [], [], []
    store_queue.this_host = lambda: host  # one process, one host: its claims and reconciles are this host's
    try:
        with Store(url) as store:
            deadline = time.monotonic() + seconds
            while True:
                if time.monotonic() < deadline:
                    queued.append(store.create_run(SPEC.replace(label=host), status="queued", host=None))
                with store.claim_queue() as claim:
                    mine = claim.queued()[:1]
                    for run_id, _spec in mine:
                        claim.started(run_id, os.getpid(), "/dev/null")
                for run_id, _spec in mine:
                    claimed.append(run_id)
                    store.add_samples(run_id, SAMPLES)
                    if not store.finish_run(run_id, "done", RESULT):
                        errors.append(f"{run_id}: had already ended")
                if not mine and time.monotonic() >= deadline:
                    break
    except Exception as exc:  # noqa: BLE001 (reported by the caller)
        errors.append(f"{type(exc).__name__}: {exc}")
    out.put((host, queued, claimed, errors))


def reader_process(url: str, seconds: float, out) -> None:
    """List the store as the pages do until `seconds` pass. Puts ("reader", rounds, [], errors)."""
    rounds, errors = 0, []
    try:
        with Store(url, read_only=True) as store:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                store.runs(limit=50), store.facets(), store.count_runs(status="done"), store.change_token()
                rounds += 1
    except Exception as exc:  # noqa: BLE001
        errors.append(f"{type(exc).__name__}: {exc}")
    out.put(("reader", rounds, [], errors))


def stress(url: str, hosts: int = 4, readers: int = 8, seconds: float = 60.0) -> dict:
    """Run the hosts and readers on `url` (an empty or fresh store) and check every run afterwards."""
    Store(url).close()  # the schema made once, before the crowd
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=host_process, args=(url, f"stress-host-{i}", seconds, out)) for i in range(hosts)]
    procs += [ctx.Process(target=reader_process, args=(url, seconds, out)) for _ in range(readers)]
    started = time.monotonic()
    for p in procs:
        p.start()
    reports = [out.get(timeout=seconds + 300) for _ in procs]
    for p in procs:
        p.join(60)
    took = time.monotonic() - started
    queued = [run_id for name, ids, _c, _e in reports if name != "reader" for run_id in ids]
    claims = Counter(run_id for name, _q, claimed, _e in reports if name != "reader" for run_id in claimed)
    errors = [f"{name}: {e}" for name, _q, _c, errs in reports for e in errs]
    errors += [f"process {p.pid} exit code {p.exitcode}" for p in procs if p.exitcode != 0]
    statuses, samples = _stored(url, queued)
    return {
        "hosts": hosts,
        "readers": readers,
        "seconds": seconds,
        "took_s": took,
        "runs": len(queued),
        "claims": sum(claims.values()),
        "claimed_twice": sorted(run_id for run_id, n in claims.items() if n > 1),
        "never_claimed": sorted(set(queued) - set(claims)),
        "lost": len(queued) - sum(statuses.values()),
        "not_done": sum(n for status, n in statuses.items() if status != "done"),
        "samples": samples,
        "samples_expected": len(queued) * len(SAMPLES),
        "reader_rounds": sum(rounds for name, rounds, _c, _e in reports if name == "reader"),
        "errors": errors,
    }


OUTAGE_BATCHES, OUTAGE_BATCH = 20, 25  # a run's samples: 20 batches of 25, a batch every 10 ms


def outage_host(url: str, host: str, seconds: float, out) -> None:
    """Runs one after another, each written as a run process writes it, until `seconds` pass. Puts (host,
    ids begun, ids ended by the outage, errors)."""
    from dashbench.jobs import run_guard, runner, store_buffer

    begun, lost, errors = [], [], []
    store_queue.this_host = lambda: host
    try:
        with Store(url, write_retry_s=runner.WRITE_RETRY_S) as store:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                writes = store_buffer.RunWrites(store, run_guard.beat_every_s())
                run_id = writes.wait_for(Store.create_run, SPEC.replace(label=host), run_id=f"{host}-{len(begun)}")
                writes.begun(run_id, SPEC.to_dict(), os.getpid())
                begun.append(run_id)
                for batch in range(OUTAGE_BATCHES):
                    writes.add_samples(
                        run_id,
                        [
                            {
                                "index": batch * OUTAGE_BATCH + i,
                                "steps": 1,
                                "duration_s": 0.01,
                                "loss": 1.0,
                                "warmup": False,
                            }
                            for i in range(OUTAGE_BATCH)
                        ],
                    )
                    time.sleep(0.01)
                try:
                    writes.finish(run_id, "done", RESULT)
                except store_buffer.RunStoreLost:
                    lost.append(run_id)
    except Exception as exc:  # noqa: BLE001 (reported by the caller)
        errors.append(f"{type(exc).__name__}: {exc}")
    out.put((host, begun, lost, errors))


def outage(server, url: str, hosts: int = 4, seconds: float = 60.0, bounces: int = 2, down_s: float = 3.0) -> dict:
    """The hosts write runs on `url` while `server` (tests/pg_server.PgServer) is crashed and started again
    `bounces` times, evenly over `seconds`; then every run and sample is checked."""
    Store(url).close()
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=outage_host, args=(url, f"outage-host-{i}", seconds, out)) for i in range(hosts)]
    started = time.monotonic()
    for p in procs:
        p.start()
    downs = []
    for bounce in range(bounces):
        time.sleep(max(0.0, started + seconds * (bounce + 1) / (bounces + 1) - time.monotonic()))
        crashed = time.monotonic()
        server.crash()
        time.sleep(down_s)
        server.restart()
        downs.append(time.monotonic() - crashed)
    reports = [out.get(timeout=seconds + 900) for _ in procs]
    for p in procs:
        p.join(60)
    begun = [run_id for _h, ids, _l, _e in reports for run_id in ids]
    lost = [run_id for _h, _b, ids, _e in reports for run_id in ids]
    errors = [f"{host}: {e}" for host, _b, _l, errs in reports for e in errs]
    errors += [f"process {p.pid} exit code {p.exitcode}" for p in procs if p.exitcode != 0]
    statuses, samples = _stored(url, begun)
    with Store(url, read_only=True) as store:
        outages = sum(
            1
            for result in (store.get_run(run_id)["result"] for run_id in begun)
            if result is not None and result.store_outage
        )
    expected = len(begun) * OUTAGE_BATCHES * OUTAGE_BATCH
    return {
        "hosts": hosts,
        "seconds": seconds,
        "took_s": time.monotonic() - started,
        "bounces": bounces,
        "down_s": downs,
        "runs": len(begun),
        "not_done": sum(n for st, n in statuses.items() if st != "done"),
        "ended_by_outage": len(lost),
        "samples": samples,
        "samples_expected": expected,
        "lost_samples": expected - samples,
        "runs_with_outage": outages,
        "errors": errors,
    }


def outage_passed(o: dict) -> bool:
    return (
        not o["errors"]
        and o["runs"] > 0
        and o["lost_samples"] == 0
        and o["ended_by_outage"] == 0
        and o["not_done"] == 0
    )


def outage_text(o: dict, loads: tuple) -> str:
    verdict = "passed" if outage_passed(o) else "FAILED"
    downs = ", ".join(f"{d:.1f} s" for d in o["down_s"])
    return "\n".join(
        [
            "## Team store through a server outage (PostgreSQL)",
            "",
            f"`bench/store_stress.py --outage --seconds {o['seconds']:g}`: {o['hosts']} processes posing as {o['hosts']} "
            f"hosts write runs one after another as a run process writes them (jobs/store_buffer.py: the run's row, "
            f"{OUTAGE_BATCHES} batches of {OUTAGE_BATCH} samples sent without waiting for each answer, its end) for "
            f"{o['seconds']:g} s, while the server is crashed as `pg_ctl -m immediate stop` does (SIGQUIT) and started "
            f"again {o['bounces']} times (down {downs}, until it answered again), {o['took_s']:.0f} s in all. A local "
            "server started by the script (fsync off, synchronous_commit on: a crash keeps every commit it answered).",
            "",
            f"**{verdict}**: {o['runs']:,} runs, {o['samples']:,} of {o['samples_expected']:,} samples stored "
            f"({o['lost_samples']} lost), {o['ended_by_outage']} runs ended by the outage, {o['not_done']} not done, "
            f"{o['runs_with_outage']} runs record an outage, {len(o['errors'])} errors.",
            "",
            f"Machine: {os.cpu_count()} CPU cores, load average {loads[0]:.1f} at the start and {loads[1]:.1f} at the "
            f"end (shared with other work while it ran); measured {time.strftime('%Y-%m-%d')}.",
        ]
    )


def _stored(url: str, run_ids: list[str]) -> tuple[Counter, int]:
    """The stored statuses of these runs, and how many samples the store holds in all."""
    with Store(url, read_only=True) as store:
        runs = store.runs(run_ids=run_ids) if run_ids else None
        return (Counter(runs["status"]) if runs is not None else Counter()), store._read(
            "SELECT count(*) FROM samples"
        )[0][0]


def passed(outcome: dict) -> bool:
    return (
        not outcome["errors"]
        and not outcome["claimed_twice"]
        and not outcome["never_claimed"]
        and outcome["lost"] == 0
        and outcome["not_done"] == 0
        and outcome["runs"] > 0
        and outcome["samples"] == outcome["samples_expected"]
    )


@contextmanager
def database(given: str | None, durable: bool = False, with_server: bool = False):
    if given:
        yield given
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from fixtures.pg_server import start_server

    server = start_server(durable)
    try:
        with server.connect() as conn:
            conn.execute("CREATE DATABASE stress")
        yield (server, server.url("stress")) if with_server else server.url("stress")
    finally:
        server.stop()


def text(outcome: dict, loads: tuple) -> str:
    o = outcome
    verdict = "passed" if passed(o) else "FAILED"
    return "\n".join(
        [
            "## Team store under load (PostgreSQL)",
            "",
            f"`bench/store_stress.py --seconds {o['seconds']:g}`: {o['hosts']} processes posing as {o['hosts']} hosts "
            f"queue runs into one PostgreSQL store and claim them (any host may take any queued run: `FOR UPDATE "
            f"SKIP LOCKED`), each claimed run started, given {len(SAMPLES)} samples and finished, while {o['readers']} "
            f"reader processes list it as the pages do (newest 50 runs, facets, a count, the change token), for "
            f"{o['seconds']:g} s, then the hosts drain the queue ({o['took_s']:.0f} s in all). A local server started "
            "by the script as the tests start theirs (fsync off), over TCP on 127.0.0.1.",
            "",
            f"**{verdict}**: {o['runs']:,} runs queued, {o['claims']:,} claims, {len(o['claimed_twice'])} claimed twice, "
            f"{len(o['never_claimed'])} never claimed, {o['lost']} lost, {o['not_done']} not done, "
            f"{o['samples']:,} of {o['samples_expected']:,} samples stored, {o['reader_rounds']:,} reader rounds "
            f"({o['reader_rounds'] / max(o['seconds'], 1e-9) / max(o['readers'], 1):.1f} a second per reader), "
            f"{len(o['errors'])} errors.",
            "",
            f"Machine: {os.cpu_count()} CPU cores, load average {loads[0]:.1f} at the start and {loads[1]:.1f} at the "
            f"end (shared with other work while it ran); measured {time.strftime('%Y-%m-%d')}.",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the hosts queue runs and readers list")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--readers", type=int, default=8)
    parser.add_argument("--pg-url", default=None, help="an empty database to use instead of a throwaway server")
    parser.add_argument("--no-docs", action="store_true", help="print only; leave docs/PERFORMANCE.md alone")
    parser.add_argument("--outage", action="store_true", help="the outage row: the server bounced twice meanwhile")
    args = parser.parse_args()
    load_start = os.getloadavg()[0]
    if args.outage:
        with database(None, durable=True, with_server=True) as (server, url):
            result = outage(server, url, args.hosts, args.seconds)
        block = outage_text(result, (load_start, os.getloadavg()[0]))
        print(block)
        for error in result["errors"][:20]:
            print("error:", error, file=sys.stderr)
        if not args.no_docs:
            write_block(DOCS, "store-outage", block)
        return 0 if outage_passed(result) else 1
    with database(args.pg_url) as url:
        outcome = stress(url, args.hosts, args.readers, args.seconds)
    block = text(outcome, (load_start, os.getloadavg()[0]))
    print(block)
    for error in outcome["errors"][:20]:
        print("error:", error, file=sys.stderr)
    if not args.no_docs:
        write_block(DOCS, "store-stress", block)
        print(f"\nwritten to {DOCS}", file=sys.stderr)
    return 0 if passed(outcome) else 1


if __name__ == "__main__":
    sys.exit(main())
