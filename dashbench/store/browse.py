"""What the dashboard's pages ask of a store that may hold 100,000 runs: filter options, counts, and a
default choice of runs to compare, each answered by a bounded query (never every run).

Functions take `read(sql, params) -> rows` (a Store's locked reader), as queries.py's do.
"""

from __future__ import annotations

from dashbench.core.spec import HELD_OUT_SYNTHETIC_MODELS
from dashbench.store import queries

Read = queries.Read

FACET_COLUMNS = ("model", "accelerator", "precision", "backend", "status")
# What makes two runs the same measurement setup: Compare's default shows the newest run of each.
SETUP_COLUMNS = (
    "model",
    "accelerator",
    "accelerator_count",
    "batch_size",
    "precision",
    "backend",
    "xla",
    "image_size",
    "seq_len",
    "width",
    "data",
)


def _to_accuracy(dialect) -> str:
    """SQL of whether a run of `runs` trains to accuracy (its spec sets a target or an epoch count): such a
    run and a throughput run of the same model and batch are two setups, not an older and a newer one. Only
    a run with a held-out split (real data, or an LM's synthetic text) can be one, and only its spec is read:
    parsing every scanned run's tripled the scan."""
    spec = "run_blobs.spec_json"
    models = ", ".join(f"'{model}'" for model in HELD_OUT_SYNTHETIC_MODELS)  # constants, not user text
    return (
        f"CASE WHEN data IN ('real', 'folder') OR model IN ({models}) THEN (SELECT "
        f"{dialect.json_text(spec, 'target_accuracy')} IS NOT NULL OR {dialect.json_text(spec, 'target_loss')} "
        f"IS NOT NULL OR {dialect.json_text(spec, 'epochs')} IS NOT NULL FROM run_blobs "
        f"WHERE run_blobs.run_id = runs.run_id) END"
    )


def facets(read: Read, columns=FACET_COLUMNS) -> dict[str, list]:
    """Distinct stored values per filter column, sorted: the options of the pages' filters. Each is a
    walk of the column's index, not a load of the runs."""
    return {column: queries.distinct(read, column) for column in columns}


def newest_model(read: Read, status: str = "done") -> str | None:
    """The model of the newest run in this status (Compare's first model filter)."""
    rows = read("SELECT model FROM runs WHERE status = ? ORDER BY created_at DESC LIMIT 1", (status,))
    return rows[0][0] if rows else None


def newest_per_setup(read: Read, limit: int = 12, scan: int = 500, **filters) -> tuple[list[str], int]:
    """(ids, scanned): the newest run of each setup (SETUP_COLUMNS, and whether it trains to accuracy)
    among the newest `scan` runs that pass `filters`, at most `limit` of them, newest first; a sweep's
    batch sizes are distinct setups, so a sweep stays whole while a setup measured twenty times counts once."""
    rows = _setup_rows(read, scan, filters)
    return [run_id for run_id, _status, *_setup in _newest_of_each(rows, limit)], len(rows)


def newest_setups(read: Read, statuses=(), limit: int = 12, scan: int = 100, **filters) -> list[tuple[str, str]]:
    """(run id, model) of newest_per_setup's runs among the newest `scan` runs that pass `filters`, of those in
    `statuses` only (every status when none is given). The statuses are kept here, as the rows come: in SQL,
    two of them made SQLite sort every run of them by time before it could take the newest."""
    wanted = {statuses} if isinstance(statuses, str) else set(statuses)
    rows = [row for row in _setup_rows(read, scan, filters) if not wanted or row[1] in wanted]
    return [(run_id, model) for run_id, _status, model, *_setup in _newest_of_each(rows, limit)]


def _setup_rows(read: Read, scan: int, filters: dict) -> list:
    """(run_id, status, *SETUP_COLUMNS, to-accuracy) of the newest `scan` runs that pass `filters`."""
    dialect = queries.dialect_of(read)
    where, params, _limit = queries.where_clause(filters, dialect)
    columns = ", ".join((*SETUP_COLUMNS, _to_accuracy(dialect)))
    return read(f"SELECT run_id, status, {columns} FROM runs{where}{queries.order_clause()} LIMIT {int(scan)}", params)


def _newest_of_each(rows: list, limit: int) -> list:
    """The first of `rows` (newest first) of each setup (all but their run_id and status), at most `limit`."""
    seen, kept = set(), []
    for row in rows:
        key = tuple(row[2:])
        if key not in seen:
            seen.add(key)
            kept.append(row)
            if len(kept) >= limit:
                break
    return kept


def run_ids(read: Read, **filters) -> list[str]:
    """The ids of the runs that pass `filters` (as Store.runs, `limit` included), newest first: a
    picker needs the ids of the newest 50, not their 45 columns made a frame."""
    where, params, limit = queries.where_clause(filters, queries.dialect_of(read))
    sql = f"SELECT run_id FROM runs{where}{queries.order_clause()}"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [row[0] for row in read(sql, params)]


def known_ids(read: Read, run_ids) -> list[str]:
    """Those of these run ids that are stored, in the order given (e.g. the ids of a ?runs= link)."""
    wanted = list(dict.fromkeys(str(r) for r in run_ids))
    if not wanted:
        return []
    found = set()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        found.update(
            r[0] for r in read(f"SELECT run_id FROM runs WHERE run_id IN ({','.join('?' * len(chunk))})", chunk)
        )
    return [r for r in wanted if r in found]
