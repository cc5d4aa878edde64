"""A run's samples in and out, and whole runs out and in (export bundles): the Store mixes this part in."""

from __future__ import annotations

import json
from typing import Iterable

import pandas as pd

from dashbench.store import queries, schema, states
from dashbench.store.errors import StoreError
from dashbench.store.ids import now
from dashbench.store.retry import retried
from dashbench.store.runs import _RUN_SELECT, LIVE_FIELDS, RUN_FIELDS, _chunks, _insert_runs, _move, _run_dict

_SAMPLE_COLUMNS = ("run_id", "idx", "steps", "duration_s", "loss", "warmup")
_SAMPLE_TYPES = ("text", "integer", "integer", "double precision", "double precision", "integer")
# Samples written by one multi-row statement (SQLite takes 32766 parameters, PostgreSQL 65535); more go by executemany.
_ROWS_PER_STATEMENT = 500


class SamplesPart:
    """Samples and bundles' rows (mixed into Store, which provides _write, _read and path)."""

    @retried
    def add_samples(self, run_id: str, samples: list[dict], wait: bool = True) -> None:
        """Store a run's samples (events: index, steps, duration_s, loss, warmup). `wait=False`: on a
        server, sent without waiting for the answer (a running run goes on training meanwhile), which
        this handle's next call reads first and raises if the batch could not be stored."""
        if not samples:
            return
        rows = self._sample_rows(run_id, samples)
        # A run that reports is alive: its samples are its heartbeat (queue.HEARTBEAT_LAPSE_S).
        heartbeat = ("UPDATE runs SET heartbeat_at = ? WHERE run_id = ?", [now(), run_id])
        if (
            not wait
            and len(rows) <= _ROWS_PER_STATEMENT
            and self._send_now(
                "add samples", [self._samples_insert(rows), heartbeat], lambda: self.add_samples(run_id, samples)
            )
        ):
            return
        if len(rows) <= _ROWS_PER_STATEMENT:  # the usual case: one statement, one round trip to a server
            # Plainly inserted first: an upsert costs a server a third more per row. An index stored
            # already (a batch sent again after its answer was lost) fails that whole statement; then
            # the rows replace theirs.
            try:
                self._write_now("add samples", [self._samples_insert(rows), heartbeat])
            except self.dialect.integrity_error:
                try:
                    self._write_now(
                        "add samples",
                        [
                            self.dialect.insert_rows(
                                "samples", _SAMPLE_COLUMNS, _SAMPLE_TYPES, rows, ("run_id", "idx"), ("run_id",)
                            ),
                            heartbeat,
                        ],
                    )
                except self.dialect.integrity_error:
                    # The samples of a run that is not stored (never was, or deleted) are refused by the
                    # database (a key on SQLite, a check per statement on a server: migration 0011).
                    if not self._read("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)):
                        raise StoreError(f"no run {run_id} in {self.path}: its samples were not stored") from None
                    raise
            return
        with self._write("add samples") as conn:
            conn.executemany(conn.dialect.upsert("samples", _SAMPLE_COLUMNS, ("run_id", "idx")), rows)
            conn.execute(*heartbeat)

    @staticmethod
    def _sample_rows(run_id: str, samples: list[dict]) -> list[tuple]:
        """The samples table's rows of a run's sample events: one per index, the last one given."""
        rows = [
            (
                run_id,
                int(s["index"]),
                int(s["steps"]),
                float(s["duration_s"]),
                None if s.get("loss") is None else float(s["loss"]),
                int(bool(s.get("warmup", False))),
            )
            for s in samples
        ]
        return list({row[1]: row for row in rows}.values())

    def _samples_insert(self, rows: list[tuple]) -> tuple[str, list] | None:
        """(sql, params) of one plain INSERT of a run's sample rows (_sample_rows), or None when they
        are too many for one statement."""
        if len(rows) > _ROWS_PER_STATEMENT:
            return None
        return self.dialect.insert_rows("samples", _SAMPLE_COLUMNS, _SAMPLE_TYPES, rows, same=("run_id",))

    def samples(self, run_id: str | list[str]) -> pd.DataFrame:
        """A run's samples (queries.SAMPLE_COLUMNS), or several runs' with a run_id column."""
        return queries.samples(self._read, run_id)

    def sample_buckets(
        self, run_id: str | list[str], buckets: int = queries.CHART_BUCKETS, measured_only: bool = False
    ) -> pd.DataFrame:
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
                f" ({','.join('?' * len(chunk))}) ORDER BY run_id, idx",
                chunk,
            ):
                samples[run_id].append([idx, steps, duration_s, loss, bool(warmup)])
        for run in runs:
            run["samples"] = samples[run["run_id"]]
        return runs

    def import_rows(self, runs: Iterable[dict]) -> dict:
        """Add whole runs from elsewhere in ONE transaction; a run id already here is skipped.
        Each run: RUN_FIELDS with the times in epoch seconds and an ended status (states.IMPORTED),
        and "samples" as lists in queries.SAMPLE_COLUMNS order. Returns counts: runs_added,
        runs_skipped, samples_added, runs_completed (stored runs that had no end, completed by an ended copy of
        themselves: _completed), and runs_differing: for each skipped run whose stored copy differs
        from the one offered (same id, other content), "run_id: field" naming the first difference;
        the stored copy is kept as it is."""
        counts = {"runs_added": 0, "runs_skipped": 0, "samples_added": 0, "runs_differing": []}
        with self._write("import runs", pipelined=False) as conn:  # COPY on a server (insert_many)
            batch: list[dict] = []
            for run in runs:
                if run["status"] not in states.IMPORTED:
                    raise ValueError(
                        f"status: an imported run has ended ({', '.join(states.IMPORTED)}), "
                        f"not {run['status']!r} (run {run['run_id']})"
                    )
                batch.append(run)
                if len(batch) >= _IMPORT_BATCH:
                    _import_batch(conn, batch, counts)
                    batch = []
            if batch:
                _import_batch(conn, batch, counts)
        return counts


# Runs looked up, compared and inserted together on import: a few statements per batch, not per run.
_IMPORT_BATCH = 500


def _import_batch(conn, runs: list[dict], counts: dict) -> None:
    """Add the runs whose ids are not stored yet (each table's rows in one executemany); count the others
    as skipped, naming the first field in which a stored copy differs from the one offered."""
    ids = list(dict.fromkeys(run["run_id"] for run in runs))
    marks = ",".join("?" * len(ids))
    stored = {row[0] for row in conn.execute(f"SELECT run_id FROM runs WHERE run_id IN ({marks})", ids).fetchall()}
    new, again, offered = [], [], set()
    for run in runs:
        (again if run["run_id"] in stored or run["run_id"] in offered else new).append(run)
        offered.add(run["run_id"])
    if new:
        _insert_runs(conn, new)
        conn.insert_many(
            "samples",
            _SAMPLE_COLUMNS,
            [
                (run["run_id"], idx, steps, duration_s, loss, int(bool(warmup)))
                for run in new
                for idx, steps, duration_s, loss, warmup in run.get("samples") or []
            ],
        )
        counts["runs_added"] += len(new)
        counts["samples_added"] += sum(len(run.get("samples") or []) for run in new)
    again = _completed(conn, again, counts)
    if again:
        counts["runs_skipped"] += len(again)
        counts["runs_differing"] += [
            f"{run['run_id']}: {difference}"
            for run, difference in zip(again, _differences(conn, again))
            if difference is not None
        ]


def _completed(conn, runs: list[dict], counts: dict) -> list[dict]:
    """Complete the stored runs that never recorded their end (still running, or presumed dead) from an
    ended copy of the same run and spec (the bundle a run wrote when its store stayed away): its samples
    and its end written over the store's; returns the other runs, skipped as before."""
    if not runs:
        return runs
    ids = list(dict.fromkeys(run["run_id"] for run in runs))
    marks = ",".join("?" * len(ids))
    open_runs = {
        run_id: json.loads(spec)
        for run_id, spec in conn.execute(
            f"SELECT run_id, spec_json FROM runs JOIN run_blobs USING (run_id) WHERE run_id IN ({marks})"
            " AND status IN ('running', 'interrupted')",
            ids,
        ).fetchall()
    }
    rest, done = [], set()
    for run in runs:
        stored = open_runs.get(run["run_id"])
        if (
            stored is None
            or run["run_id"] in done
            or _normal(stored) != _normal(run["spec"])
            or run["status"] in ("running", "queued")
        ):
            rest.append(run)
            continue
        done.add(run["run_id"])
        conn.execute("DELETE FROM samples WHERE run_id = ?", (run["run_id"],))
        conn.insert_many(
            "samples",
            _SAMPLE_COLUMNS,
            [
                (run["run_id"], idx, steps, duration_s, loss, int(bool(warmup)))
                for idx, steps, duration_s, loss, warmup in run.get("samples") or []
            ],
        )
        values = {"finished_at": run.get("finished_at"), "error": run.get("error"), "phase": None}
        values.update(schema.flat_values(run["spec"], run.get("result")))
        _move(conn, run["run_id"], run["status"], values, only_from=("running", "interrupted"))
        conn.execute(
            "UPDATE run_blobs SET result_json = ? WHERE run_id = ?",
            (None if run.get("result") is None else json.dumps(run["result"]), run["run_id"]),
        )
        counts["runs_completed"] = counts.get("runs_completed", 0) + 1
        counts["samples_added"] += len(run.get("samples") or [])
    return rest


def _differences(conn, runs: list[dict]) -> list[str | None]:
    """For each run (an import's form: epoch times, samples as lists), the first field in which the
    stored run of its id differs from it, or None when they are the same run: two reads for them all."""
    ids = list(dict.fromkeys(run["run_id"] for run in runs))
    marks = ",".join("?" * len(ids))
    stored = {
        row[0]: dict(zip(RUN_FIELDS + LIVE_FIELDS, row))
        for row in conn.execute(f"{_RUN_SELECT} WHERE run_id IN ({marks})", ids).fetchall()
    }
    samples: dict[str, list] = {run_id: [] for run_id in ids}
    for run_id, *row in conn.execute(
        f"SELECT run_id, idx, steps, duration_s, loss, warmup FROM samples"
        f" WHERE run_id IN ({marks}) ORDER BY run_id, idx",
        ids,
    ).fetchall():
        samples[run_id].append(tuple(row))
    return [_first_difference(stored[run["run_id"]], samples[run["run_id"]], run) for run in runs]


def _first_difference(stored: dict, stored_samples: list, run: dict) -> str | None:
    """The first field in which a stored run (a _RUN_SELECT row as a dict, its samples' rows) differs from `run`."""
    stored = dict(stored)
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
    offered = sorted(
        (int(i), int(st), float(d), None if lo is None else float(lo), bool(w))
        for i, st, d, lo, w in run.get("samples") or []
    )
    if [(i, st, d, lo, bool(w)) for i, st, d, lo, w in stored_samples] != offered:
        return "samples"
    return None


def _normal(value):
    """A value as JSON would give it back (tuples as lists), so a stored copy and a bundle's compare."""
    return json.loads(json.dumps(value, default=str)) if value is not None else None
