"""The read side of the results database: run filters as SQL, and runs/samples as DataFrames.

Functions take `read(sql, params) -> rows` (a Store's locked reader), so they hold no connection.
No TensorFlow here.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Callable

import numpy as np
import pandas as pd

from dashbench.store.sqlite.dialect import SQLITE
from dashbench.store.states import STATUSES

Read = Callable[..., list]


def dialect_of(read: Read):
    """The dialect of the store behind `read` (a Store's bound reader), SQLite's for a bare function."""
    return getattr(getattr(read, "__self__", None), "dialect", SQLITE)


RUN_COLUMNS = (
    "run_id",
    "created_at",
    "started_at",
    "finished_at",
    "status",
    "model",
    "device",
    "backend",
    "backend_version",
    "accelerator",
    "accelerator_count",
    "replicas",
    "batch_size",
    "precision",
    "xla",
    "data",
    "label",
    "sweep_id",
    "host",
    "examples_per_sec",
    "step_time_median_s",
    "step_time_p10_s",
    "step_time_p90_s",
    "step_time_std_s",
    "samples",
    "compile_s",
    "achieved_tflops",
    "mfu",
    "flags",
    "error",
    # Beyond the agreed list: what a chart's axis label or a confidence band needs.
    "unit",
    "steps",
    "examples_per_sec_ci95_lo",
    "examples_per_sec_ci95_hi",
    "peak_tflops",
    "pid",
    "phase",
    # The spec's shape overrides (NaN: the workload's full-size default), schema v5.
    "image_size",
    "seq_len",
    "width",
    # The host's logical CPUs (what a CPU run is priced by), schema v7.
    "host_cpus",
)
_SQL_NAMES = {"samples": "n_samples", "flags": "flags_json"}
_FLOAT_COLUMNS = (
    "examples_per_sec",
    "step_time_median_s",
    "step_time_p10_s",
    "step_time_p90_s",
    "step_time_std_s",
    "compile_s",
    "achieved_tflops",
    "mfu",
    "examples_per_sec_ci95_lo",
    "examples_per_sec_ci95_hi",
    "peak_tflops",
)
# Never empty. The counts that are empty until a run ends (accelerator_count, replicas, samples,
# pid) stay float64 with NaN: pandas' nullable Int64 would hand consumers pd.NA, which breaks
# `int(x)` and `if x` in code that checks for None/NaN.
_INT_COLUMNS = ("batch_size", "steps")
_COUNT_COLUMNS = ("accelerator_count", "replicas", "samples", "pid", "image_size", "seq_len", "width", "host_cpus")
SAMPLE_COLUMNS = ("index", "steps", "duration_s", "loss", "warmup")
# Where a free-text search looks (a page's search box).
_SEARCH_COLUMNS = (
    "run_id",
    "label",
    "host",
    "model",
    "accelerator",
    "backend",
    "precision",
    "status",
    "sweep_id",
    "error",
)
_FILTER_COLUMNS = (
    "model",
    "device",
    "backend",
    "accelerator",
    "precision",
    "batch_size",
    "status",
    "sweep_id",
    "label",
    "host",
)


def to_epoch(value: Any) -> float:
    """A time filter as seconds since the epoch: datetime, date, ISO text, pandas Timestamp or number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(
                f"since/until: not a date or time: {value!r} (use e.g. 2025-01-31 or 2025-01-31T12:00)"
            ) from None
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.astimezone()  # naive times mean local time, as a user typed them
        return value.timestamp()
    if isinstance(value, _dt.date):
        return _dt.datetime(value.year, value.month, value.day).astimezone().timestamp()
    raise ValueError(f"since/until: not a date or time: {value!r}")


# What a page may sort by in SQL (the cost column is derived from prices when shown, so it is not here).
SORT_COLUMNS = (
    "created_at",
    "examples_per_sec",
    "step_time_median_s",
    "mfu",
    "compile_s",
    "batch_size",
    "model",
    "accelerator",
    "status",
    "backend",
    "precision",
    "label",
    "host",
)


def order_clause(order_by: str = "created_at", descending: bool = True) -> str:
    """ " ORDER BY ..." for a SORT_COLUMNS name; runs without the figure last; newest first among equals."""
    if order_by not in SORT_COLUMNS:
        raise ValueError(f"order_by: one of {', '.join(SORT_COLUMNS)}, not {order_by!r}")
    way = "DESC" if descending else "ASC"
    if order_by == "created_at":
        return f" ORDER BY created_at {way}, run_id {way}"
    return f" ORDER BY {order_by} IS NULL, {order_by} {way}, created_at DESC, run_id DESC"


def runs(read: Read, order_by: str = "created_at", descending: bool = True, offset: int = 0, **filters) -> pd.DataFrame:
    """One row per run, flat columns (see RUN_COLUMNS), newest first unless `order_by` (a
    SORT_COLUMNS name) says otherwise; filters as Store.runs; `offset` skips rows (paging with limit)."""
    dialect = dialect_of(read)
    where, params, limit = where_clause(filters, dialect)
    select = ", ".join(f"{_SQL_NAMES.get(c, c)}" for c in RUN_COLUMNS)
    sql = f"SELECT {select} FROM runs{where}{order_clause(order_by, descending)}"
    if limit is not None or offset:
        sql += f" LIMIT {dialect.no_limit if limit is None else int(limit)} OFFSET {max(0, int(offset))}"
    rows, unreadable = readable_rows(read(sql, params))
    # Column by column with known types: 100k runs would spend seconds in pandas' type inference.
    columns = list(zip(*rows)) if rows else [()] * len(RUN_COLUMNS)
    data: dict[str, Any] = {}
    parsed: dict[str, list] = {}
    for name, values in zip(RUN_COLUMNS, columns):
        if name in ("created_at", "started_at", "finished_at"):
            stamps = pd.to_datetime(np.array(values, dtype="float64"), unit="s", utc=True)
            data[name] = stamps.round("us").as_unit("us")
        elif name in _FLOAT_COLUMNS or name in _COUNT_COLUMNS:
            data[name] = np.array(values, dtype="float64")  # None becomes NaN
        elif name in _INT_COLUMNS:
            data[name] = np.array(values, dtype="int64")
        elif name == "flags":
            for text in set(values):
                parsed[text] = json.loads(text or "[]")
            data[name] = pd.Series([list(parsed[text]) for text in values], dtype=object)
        elif name == "xla":  # always set: it comes from the spec
            data[name] = np.array([bool(v) for v in values], dtype=bool)
        else:
            data[name] = pd.array(values, dtype="str")  # missing text is NaN, also in an empty frame
    frame = pd.DataFrame(data, columns=list(RUN_COLUMNS))
    frame.attrs["unreadable"] = unreadable
    return frame


def unreadable_text(frame: pd.DataFrame) -> str:
    """'' or one line naming the stored runs that runs() skipped, for the CLI and the pages."""
    bad = frame.attrs.get("unreadable") or {}
    if not bad:
        return ""
    listed = "; ".join(f"{run_id} ({why})" for run_id, why in list(bad.items())[:5])
    more = f"; and {len(bad) - 5} more" if len(bad) > 5 else ""
    return f"{len(bad)} stored run{'s' if len(bad) > 1 else ''} could not be read: {listed}{more}"


# Epoch seconds pandas can hold as a time (its nanosecond range ends in 2262).
_EPOCH_LIMIT = 9.2e9


def readable_rows(rows: list) -> tuple[list, dict]:
    """The rows (in RUN_COLUMNS order) that runs() can turn into a frame, and {run_id: "field: why"}
    for the others: rows written by hand or by an older version must not break every view."""
    if not rows or not any(_suspect(name, values) for name, values in zip(RUN_COLUMNS, zip(*rows))):
        return rows, {}  # the common case, judged a column at a time: row by row costs seconds at 100k
    good, bad = [], {}
    for row in rows:
        problem = row_problem(row)
        if problem is None:
            good.append(row)
        else:
            bad[str(row[0])] = problem
    return good, bad


_NUMBER = {int, float}


def _suspect(name: str, values: tuple) -> bool:
    """Whether a column may hold a value row_problem refuses (then each row is judged)."""
    types = set(map(type, values))
    if name in ("created_at", "started_at", "finished_at"):
        present = [v for v in values if v is not None]
        if not types <= _NUMBER | ({type(None)} if name != "created_at" else set()):
            return True
        return bool(present) and not float(np.max(np.abs(np.array(present, dtype="float64")))) < _EPOCH_LIMIT
    if name in _FLOAT_COLUMNS or name in _COUNT_COLUMNS:
        return not types <= _NUMBER | {type(None)}
    if name in _INT_COLUMNS:
        return not types <= {int}
    if name == "flags":
        return any(_flags_problem(text) for text in set(values))
    if name == "xla":
        return False
    return not types <= {str, int, float, type(None)}


def _flags_problem(value) -> str | None:
    try:
        flags = json.loads(value or "[]")
    except (TypeError, ValueError):
        return f"flags: not JSON ({value!r})"
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        return f"flags: not a list of names ({value!r})"
    return None


def row_problem(row: tuple) -> str | None:
    """Why one row of runs() cannot be shown ("field: why"), or None. The one judge of a stored row."""
    for name, value in zip(RUN_COLUMNS, row):
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if name in ("created_at", "started_at", "finished_at"):
            if value is None and name != "created_at":
                continue
            if not number or not abs(value) < _EPOCH_LIMIT:
                return f"{name}: not a time ({value!r})"
        elif name in _FLOAT_COLUMNS or name in _COUNT_COLUMNS:
            if value is not None and not number:
                return f"{name}: not a number ({value!r})"
        elif name in _INT_COLUMNS:
            if not isinstance(value, int) or isinstance(value, bool):
                return f"{name}: not a whole number ({value!r})"
        elif name == "flags":
            problem = _flags_problem(value)
            if problem:
                return problem
        elif name != "xla" and value is not None and not isinstance(value, (str, int, float)):
            return f"{name}: not text ({type(value).__name__})"
    return None


def count_runs(read: Read, **filters) -> int:
    where, params, _limit = where_clause(filters, dialect_of(read))
    return read(f"SELECT count(*) FROM runs{where}", params)[0][0]


def samples(read: Read, run_id: str | list[str]) -> pd.DataFrame:
    """One run's samples in order; for a list of run ids, theirs in one query, with a run_id column."""
    if isinstance(run_id, str):
        rows = read("SELECT idx, steps, duration_s, loss, warmup FROM samples WHERE run_id = ? ORDER BY idx", (run_id,))
        columns = list(SAMPLE_COLUMNS)
    else:
        ids = list(run_id)
        rows = (
            read(
                f"SELECT run_id, idx, steps, duration_s, loss, warmup FROM samples WHERE run_id IN "
                f"({','.join('?' * len(ids))}) ORDER BY run_id, idx",
                ids,
            )
            if ids
            else []
        )
        columns = ["run_id", *SAMPLE_COLUMNS]
    frame = pd.DataFrame.from_records(rows, columns=columns)
    frame["loss"] = frame["loss"].astype("float64")
    frame["warmup"] = frame["warmup"].astype(bool)
    return frame


# Points a chart draws per run and phase (warm-up, measured): a run with fewer loops is drawn loop by loop.
CHART_BUCKETS = 500


def sample_buckets(
    read: Read, run_id: str | list[str], buckets: int = CHART_BUCKETS, measured_only: bool = False
) -> pd.DataFrame:
    """samples() shaped for a chart, summed in SQL into at most `buckets` rows per run and phase (warm-up,
    measured), so that no stored run (1.5 million loops) makes a page read or draw all of its rows. A phase's
    first and last loop are rows of their own (a slow first loop stays visible); the loops between share the
    rest by index, one loop per row while they fit. A row: its first loop's index, the sums of its loops'
    steps and seconds (duration_s / steps is their mean step time, and sums over rows are the run's), the
    mean of their losses, and `loops`, how many it sums."""
    if isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 3:
        raise ValueError(f"buckets: a whole number of at least 3, not {buckets!r}")
    ids = [run_id] if isinstance(run_id, str) else list(dict.fromkeys(run_id))
    rows = []
    for one in ids:
        for warmup in (0,) if measured_only else (1, 0):
            # The phase's ends through the (run_id, idx) key: no scan of the run's rows.
            ends = [
                read(
                    f"SELECT idx FROM samples WHERE run_id = ? AND warmup = ? ORDER BY idx {way} LIMIT 1", (one, warmup)
                )
                for way in ("ASC", "DESC")
            ]
            if not ends[0]:
                continue
            lo, hi = ends[0][0][0], ends[1][0][0]
            # Integer arithmetic: exact, so inner loops that fit keep a bucket each.
            rows += [
                (one, *row, bool(warmup))
                for row in read(
                    "SELECT min(idx), sum(steps), sum(duration_s), avg(loss), count(*) FROM samples"
                    " WHERE run_id = ? AND warmup = ? AND idx BETWEEN ? AND ?"
                    " GROUP BY CASE WHEN idx = ? THEN -1 WHEN idx = ? THEN ? ELSE (idx - ? - 1) * ? / ? END"
                    " ORDER BY 1",
                    (one, warmup, lo, hi, lo, hi, buckets, lo, buckets - 2, max(1, hi - lo - 1)),
                )
            ]
    frame = pd.DataFrame.from_records(
        rows, columns=["run_id", "index", "steps", "duration_s", "loss", "loops", "warmup"]
    )
    frame = frame[["run_id", *SAMPLE_COLUMNS, "loops"]]
    frame["loss"] = frame["loss"].astype("float64")
    frame["warmup"] = frame["warmup"].astype(bool)
    return frame.drop(columns="run_id") if isinstance(run_id, str) else frame


# Columns with few values and an index that starts with them (runs_<column>, runs_status): their distinct
# values are found by a skip scan, one index lookup per value. SELECT DISTINCT walks the whole index on both
# databases (PostgreSQL has no skip scan), too slow at 1M runs for five columns on every first load.
_SKIP_SCAN_COLUMNS = frozenset({"model", "device", "backend", "accelerator", "precision", "batch_size", "status"})


def distinct(read: Read, column: str) -> list:
    """Distinct values of one filter column, for the dashboard's select boxes."""
    allowed = set(_FILTER_COLUMNS)
    if column not in allowed:
        raise ValueError(f"column: one of {', '.join(sorted(allowed))}, not {column!r}")
    if column in _SKIP_SCAN_COLUMNS:
        return [
            r[0]
            for r in read(
                f"WITH RECURSIVE found(value) AS (SELECT min({column}) FROM runs UNION ALL"
                f" SELECT (SELECT min({column}) FROM runs WHERE {column} > found.value) FROM found"
                f" WHERE found.value IS NOT NULL) SELECT value FROM found WHERE value IS NOT NULL ORDER BY 1"
            )
        ]
    return [r[0] for r in read(f"SELECT DISTINCT {column} FROM runs WHERE {column} IS NOT NULL ORDER BY 1")]


def where_clause(filters: dict, dialect=SQLITE) -> tuple[str, list, int | None]:
    """Store.runs' filters as (" WHERE ..." or "", parameters, limit); an unknown filter is a ValueError."""
    filters = dict(filters)
    limit = filters.pop("limit", None)
    clauses, params = [], []
    for name in _FILTER_COLUMNS:
        value = filters.pop(name, None)
        if value is None:
            continue
        values = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
        if not values:
            clauses.append("1 = 0")
            continue
        if name == "status":
            bad = [v for v in values if v not in STATUSES]
            if bad:
                raise ValueError(f"status: unknown status {bad[0]!r}; choose from {', '.join(STATUSES)}")
        clauses.append(f"{name} IN ({','.join('?' * len(values))})")
        params.extend(values)
    search = str(filters.pop("search", None) or "").strip()
    if search:
        # Case-insensitive substring of any text a user might type: LIKE's wildcards in it are literal.
        pattern = "%" + search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        clauses.append("(" + " OR ".join(f"{c} {dialect.like} ? ESCAPE '\\'" for c in _SEARCH_COLUMNS) + ")")
        params.extend([pattern] * len(_SEARCH_COLUMNS))
    run_ids = filters.pop("run_ids", None)
    if run_ids is not None:
        run_ids = list(run_ids)
        clauses.append(f"run_id IN ({','.join('?' * len(run_ids))})" if run_ids else "1 = 0")
        params.extend(run_ids)
    since = filters.pop("since", None)
    if since is not None:
        clauses.append("created_at >= ?")
        params.append(to_epoch(since))
    until = filters.pop("until", None)
    if until is not None:
        # A bare date means "up to the end of that day".
        whole_day = (isinstance(until, _dt.date) and not isinstance(until, _dt.datetime)) or (
            isinstance(until, str) and len(until.strip()) == 10
        )
        clauses.append("created_at < ?" if whole_day else "created_at <= ?")
        params.append(to_epoch(until) + (86400 if whole_day else 0))
    if filters:
        name = sorted(filters)[0]
        raise ValueError(
            f"{name}: unknown filter; known: "
            f"{', '.join(_FILTER_COLUMNS + ('run_ids', 'search', 'since', 'until', 'limit'))}"
        )
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params, limit
