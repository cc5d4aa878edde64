"""A multi-host run's other hosts join its one stored row (jobs/multihost.py says who writes what).

Worker 0 writes the run and its result; every other process of the run adds its host and devices to
that result's placement once worker 0 has written it. The placement lives in the result's JSON
(no column of its own), merged under a row lock so two hosts adding at once both land."""

from __future__ import annotations

import json
import time
from typing import Callable

from dashbench.store.errors import StoreError
from dashbench.store.ids import now
from dashbench.store.runs import _move
from dashbench.store.states import TERMINAL

POLL_S = 0.25


def add_to_placement(store, run_id: str, merge: Callable[[dict], dict], wait_s: float = 120.0) -> bool:
    """On `store` (a Store; its own methods are edited by others in parallel, so this part stands
    beside them), replace run `run_id`'s result placement with `merge(placement)`, once the run's result is
    written (worker 0 writes it when its own process ends: the hosts end within seconds of each
    other). Returns False when the run ended without a result (failed, cancelled) or `wait_s`
    passed with none: there is then no placement to add to."""
    deadline = time.monotonic() + wait_s
    while True:
        rows = store._read(
            "SELECT status, result_json IS NOT NULL FROM runs JOIN run_blobs USING (run_id) WHERE run_id = ?", (run_id,)
        )
        if rows and rows[0][1]:
            break
        if rows and rows[0][0] in TERMINAL:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    with store._write("add a host to a run's placement") as conn:
        # The no-op update takes the row's lock first (PostgreSQL), so the read below sees any
        # other host's addition committed before ours; SQLite's write lock already serialises us.
        conn.execute("UPDATE run_blobs SET result_json = result_json WHERE run_id = ?", (run_id,))
        row = conn.execute("SELECT result_json FROM run_blobs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None or row[0] is None:
            raise StoreError(f"run_id: run {run_id} has no result in {store.path}")
        result = json.loads(row[0])
        result["placement"] = merge(dict(result.get("placement") or {}))
        conn.execute("UPDATE run_blobs SET result_json = ? WHERE run_id = ?", (json.dumps(result), run_id))
    return True


def end_group_run(
    store, run_id: str, status: str, error: str, only_from: tuple[str, ...] = ("queued", "running", "interrupted")
) -> bool:
    """The end a multi-host run's launcher judged (a worker's failure, a lost host), written over a run
    still going or only presumed `interrupted` (worker 0 saw a peer stop answering, not why); never
    over an end a worker recorded itself. Returns whether it was written."""
    with store._write("record a run's end") as conn:
        return _move(conn, run_id, status, {"error": error, "finished_at": now(), "phase": None}, only_from=only_from)
