"""A run's samples in and out, and whole runs out and in (export bundles): the Store mixes this part in."""

from __future__ import annotations

import json
from typing import Iterable

import pandas as pd

from dashbench.store import queries, states
from dashbench.store.ids import now
from dashbench.store.runs import LIVE_FIELDS, RUN_FIELDS, _RUN_SELECT, _chunks, _insert_run, _run_dict


_SAMPLE_COLUMNS = ("run_id", "idx", "steps", "duration_s", "loss", "warmup")


class SamplesPart:
    """Samples and bundles' rows (mixed into Store, which provides _write, _read and path)."""

    def add_samples(self, run_id: str, samples: list[dict]) -> None:
        if not samples:
            return
        rows = [
            (run_id, int(s["index"]), int(s["steps"]), float(s["duration_s"]),
             None if s.get("loss") is None else float(s["loss"]), int(bool(s.get("warmup", False))))
            for s in samples
        ]
        with self._write("add samples") as conn:
            conn.executemany(conn.dialect.upsert("samples", _SAMPLE_COLUMNS, ("run_id", "idx")), rows)
            # A run that reports is alive: its samples are its heartbeat (queue.HEARTBEAT_LAPSE_S).
            conn.execute("UPDATE runs SET heartbeat_at = ? WHERE run_id = ?", (now(), run_id))

    def samples(self, run_id: str | list[str]) -> pd.DataFrame:
        """A run's samples (queries.SAMPLE_COLUMNS), or several runs' with a run_id column."""
        return queries.samples(self._read, run_id)

    def sample_buckets(self, run_id: str | list[str], buckets: int = queries.CHART_BUCKETS,
                       measured_only: bool = False) -> pd.DataFrame:
        """samples() for a chart: at most `buckets` rows per run and phase, summed in SQL (queries.sample_buckets)."""
        return queries.sample_buckets(self._read, run_id, buckets, measured_only)

    # -- whole runs out and in (export bundles) --------------------------------------------------

    def export_rows(self, **filters) -> list[dict]:
        """The runs matching `filters` (as runs()), oldest first, each as get_run's dict plus
        "samples": lists in queries.SAMPLE_COLUMNS order."""
        where, params, limit = queries.where_clause(filters, self.dialect)
        sql = f"{_RUN_SELECT}{where} ORDER BY created_at, run_id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        runs = [_run_dict(row) for row in self._read(sql, params)]
        samples: dict[str, list] = {run["run_id"]: [] for run in runs}
        for chunk in _chunks(list(samples)):
            for run_id, idx, steps, duration_s, loss, warmup in self._read(
                f"SELECT run_id, idx, steps, duration_s, loss, warmup FROM samples WHERE run_id IN"
                f" ({','.join('?' * len(chunk))}) ORDER BY run_id, idx", chunk
            ):
                samples[run_id].append([idx, steps, duration_s, loss, bool(warmup)])
        for run in runs:
            run["samples"] = samples[run["run_id"]]
        return runs

    def import_rows(self, runs: Iterable[dict]) -> dict:
        """Add whole runs from elsewhere in ONE transaction; a run id already here is skipped.
        Each run: RUN_FIELDS with the times in epoch seconds and an ended status (states.IMPORTED),
        and "samples" as lists in queries.SAMPLE_COLUMNS order. Returns counts: runs_added,
        runs_skipped, samples_added, and runs_differing: for each skipped run whose stored copy differs
        from the one offered (same id, other content), "run_id: field" naming the first difference;
        the stored copy is kept as it is."""
        counts = {"runs_added": 0, "runs_skipped": 0, "samples_added": 0, "runs_differing": []}
        with self._write("import runs") as conn:
            for run in runs:
                if run["status"] not in states.IMPORTED:
                    raise ValueError(f"status: an imported run has ended ({', '.join(states.IMPORTED)}), "
                                     f"not {run['status']!r} (run {run['run_id']})")
                if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run["run_id"],)).fetchone():
                    counts["runs_skipped"] += 1
                    difference = _first_difference(conn, run)
                    if difference is not None:
                        counts["runs_differing"].append(f"{run['run_id']}: {difference}")
                    continue
                _insert_run(conn, run)
                samples = run.get("samples") or []
                conn.executemany(
                    "INSERT INTO samples (run_id, idx, steps, duration_s, loss, warmup) VALUES (?,?,?,?,?,?)",
                    [(run["run_id"], idx, steps, duration_s, loss, int(bool(warmup)))
                     for idx, steps, duration_s, loss, warmup in samples],
                )
                counts["runs_added"] += 1
                counts["samples_added"] += len(samples)
        return counts


def _first_difference(conn, run: dict) -> str | None:
    """The first field in which the stored run `run["run_id"]` differs from `run` (an import's
    form: epoch times, samples as lists), or None when they are the same run."""
    row = conn.execute(f"{_RUN_SELECT} WHERE run_id = ?", (run["run_id"],)).fetchone()
    stored = dict(zip(RUN_FIELDS + LIVE_FIELDS, row))
    for name in ("spec", "result"):
        try:
            stored[name] = json.loads(stored[name]) if stored[name] else None
        except (TypeError, ValueError):
            pass
    for name in ("status", "spec", "result", "error", "host", "sweep_id", "label"):
        offered = run.get(name, run["spec"].get("label") if name == "label" else None)
        if _normal(stored.get(name)) != _normal(offered):
            return name
    for name in ("created_at", "started_at", "finished_at"):
        mine, theirs = stored.get(name), run.get(name)
        if (mine is None) != (theirs is None) or (mine is not None and abs(float(mine) - float(theirs)) > 1e-3):
            return name
    rows = conn.execute("SELECT idx, steps, duration_s, loss, warmup FROM samples WHERE run_id = ? ORDER BY idx",
                        (run["run_id"],)).fetchall()
    offered = sorted((int(i), int(st), float(d), None if lo is None else float(lo), bool(w))
                     for i, st, d, lo, w in run.get("samples") or [])
    if [(i, st, d, lo, bool(w)) for i, st, d, lo, w in rows] != offered:
        return "samples"
    return None


def _normal(value):
    """A value as JSON would give it back (tuples as lists), so a stored copy and a bundle's compare."""
    return json.loads(json.dumps(value, default=str)) if value is not None else None


