"""The Results page: the table of stored runs a page at a time, bundle export, import and delete."""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from dashbench.results.result import short_id
from dashbench.store import ACTIVE, StoreError
from dashbench.views.common.format import cost_help, flag_text, md_text, nullable_ints, run_label, run_labels, with_ms

# The figures a user came for first (seen at a 1400 px window: columns.MUST_SEE), then what ran, then bookkeeping.
RESULTS_COLUMNS = [
    "run",
    "status",
    "examples_per_sec",
    "mfu",
    "usd_per_million_examples",
    "flags",
    "price_key",  # the price row behind the cost, right after the figures that must be seen
    "step_time_median_ms",
    "step_time_p10_ms",
    "step_time_p90_ms",
    "model",
    "backend",
    "backend_version",
    "accelerator",
    "accelerator_count",
    "batch_size",
    "precision",
    "xla",
    "samples",
    "compile_s",
    "created_at",
    "run_label",
    "sweep_id",
    "host",
    "error",
    "run_id",
]


PAGE_SIZE = 100
# Sort choices of the Results page: key -> (label, store column, descending). Sorting happens in SQL,
# over every run that passes the filters, not only the page shown.
SORTS = {
    "newest": ("Newest first", "created_at", True),
    "oldest": ("Oldest first", "created_at", False),
    "fastest": ("Throughput, highest first", "examples_per_sec", True),
    "slowest": ("Throughput, lowest first", "examples_per_sec", False),
    "step_time": ("Step time, shortest first", "step_time_median_s", False),
    "mfu": ("MFU, highest first", "mfu", True),
    "compile": ("Compile time, longest first", "compile_s", True),
    "batch": ("Batch size, largest first", "batch_size", True),
    "model": ("Model, A to Z", "model", False),
    "accelerator": ("Accelerator, A to Z", "accelerator", False),
    "status": ("Status, A to Z", "status", False),
}


def page_count(total: int, size: int = PAGE_SIZE) -> int:
    """Pages of `size` rows that `total` runs fill (at least one, for an empty table)."""
    return max(1, -(-int(total) // size))


def page_caption(
    total: int, stored: int, page: int, shown: int, order: str, size: int = PAGE_SIZE, models: Iterable = ()
) -> str:
    """ "Runs 101–200 of 18,234 that pass the filters (100,000 stored), …": what the table holds."""
    if not total:
        return f"No run passes the filters ({stored:,} stored)."
    first = (page - 1) * size + 1
    return (
        f"Runs {first:,}–{first + shown - 1:,} of {total:,} that pass the filters ({stored:,} stored), "
        f"{order.lower()}. A click on a column header sorts this page only; cost is {cost_help(models)} "
        "(blank: no price)."
    )


def overview(store) -> tuple[int, dict]:
    """(runs stored, the filters' options): what every visitor's first screen reads, read together so
    that a page kept per store version (ui.shared) costs a new visitor one cache look-up, not two."""
    return store.count_runs(), store.facets()


def page_of_runs(store, query: dict, sort: str, page: int, catalog: pd.DataFrame | None) -> tuple:
    """(the stored rows of one page of the table, the table drawn from them): the page's query in SQL,
    sorted by SORTS[sort] over every run that passes the filters."""
    _label, order_by, descending = SORTS[sort]
    shown = store.runs(
        **query, order_by=order_by, descending=descending, offset=(page - 1) * PAGE_SIZE, limit=PAGE_SIZE
    )
    return shown, results_table(shown, catalog)


def table_key(run_ids: Iterable[str]) -> str:
    """The results table's widget key, one per set of rows shown: a selection is of row positions, so
    a table showing other rows (a new run, a delete, another page) must start unselected."""
    import hashlib

    digest = hashlib.sha1("\n".join(map(str, run_ids)).encode()).hexdigest()[:12]
    return f"res_table_{digest}"


def short_label(runs: pd.DataFrame, run_id: str) -> str:
    """A run's label from the rows shown (its id's short form if it is not among them)."""
    rows = runs[runs["run_id"] == run_id] if "run_id" in runs else runs.iloc[0:0]
    return run_label(rows.iloc[0].to_dict()) if not rows.empty else short_id(run_id)


def results_table(runs: pd.DataFrame, catalog: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every stored run, one row each, key figures first; step times in ms; cost if a catalog is given."""
    table = with_ms(runs).rename(columns={"label": "run_label"})
    table["run"] = run_labels(runs, id_first=True)  # the id in view, however long the rest
    if "flags" in table:
        table["flags"] = [flag_text(f) for f in table["flags"]]
    if catalog is not None and not table.empty:
        table["usd_per_million_examples"], table["price_key"] = priced(table, catalog)
    columns = [c for c in RESULTS_COLUMNS if c in table]
    return nullable_ints(table[columns]).reset_index(drop=True)


def usd_per_million(runs: pd.DataFrame, catalog: pd.DataFrame) -> list:
    """On-demand USD per million of each run's unit (NaN: no price): its examples_per_sec counts
    tokens for an LM (stats.examples_per_item), so the same division gives USD per million tokens."""
    return priced(runs, catalog)[0]


def priced(runs: pd.DataFrame, catalog: pd.DataFrame) -> tuple[list, list]:
    """(usd_per_million as above, the price row behind each cost: its catalog key, None unpriced)."""
    from dashbench.costs import run_cost

    match = run_cost.matcher(catalog)
    out, keys = [], []
    n = len(runs)
    for acc, count, eps, cpus in zip(
        runs.get("accelerator", [None] * n),
        runs.get("accelerator_count", [None] * n),
        runs.get("examples_per_sec", [None] * n),
        runs.get("host_cpus", [None] * n),
    ):
        values = run_cost.cost_values(acc, count, eps, match, cpus)
        out.append(values["usd_per_million_examples"])
        keys.append(values["price_key"])
    return pd.to_numeric(pd.Series(out, dtype=object), errors="coerce").tolist(), keys


def bundle_bytes(db_path: str, **filters) -> bytes:
    """An export bundle of the runs matching `filters` (as Store.runs) as bytes, through a read-only
    connection of its own."""
    import tempfile
    from pathlib import Path

    from dashbench.store import Store, export_bundle

    with tempfile.TemporaryDirectory() as tmp, Store(db_path, read_only=True) as store:
        path = Path(tmp) / "bundle.json"
        export_bundle(store, path, **filters)
        return path.read_bytes()


def import_uploads(store, uploads: list[tuple[str, bytes]]) -> tuple[str, bool]:
    """Import uploaded bundle files; (markdown message, ok). A bad file is named in the message, nothing half-done."""
    import tempfile
    from pathlib import Path

    from dashbench.store import StoreError, import_bundles

    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, (name, data) in enumerate(uploads):
            path = Path(tmp) / f"{i}-{Path(name).name}"
            path.write_bytes(data)
            paths.append(path)
        try:
            counts = import_bundles(store, paths)
        # A BundleError (the file) or any other StoreError/ValueError (the database): one line, never a trace.
        except (StoreError, ValueError) as exc:  # its text quotes the bundle: shown as text
            message = str(exc)
            for path, (name, _data) in zip(paths, uploads):  # the user's file name, not our scratch copy's
                message = message.replace(str(path), name)
            return f"Import failed: {md_text(message)}", False
    return import_summary(counts), True


def delete_runs(store, run_ids: list[str]) -> tuple[str, bool]:
    """Delete these runs and their samples unless one is queued or running; (markdown message, ok).
    Deleting a running run would kill its measurement, so, as `delete` without --force, nothing is
    deleted then and the message names the runs to cancel first."""
    ids = list(run_ids)
    busy = []
    for run_id in ids:
        run = store.get_run(run_id)
        if run is not None and run["status"] in ACTIVE:
            busy.append(f"{md_text(run_id)} ({run['status']})")
    if busy:
        is_, it, ends = ("is", "it", "it ends") if len(busy) == 1 else ("are", "them", "they end")
        return (
            f"Nothing deleted: {', '.join(busy)} {is_} not finished. Cancel {it} on the Run page "
            f"first, or wait until {ends}."
        ), False
    try:
        removed = store.delete_runs(ids)
    except StoreError as exc:  # a read-only file, a write lock held too long: said, not a crash
        return f"Nothing deleted: {md_text(str(exc))}", False
    return f"Deleted {_count(removed, 'run')}.", True


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def import_summary(counts: dict) -> str:
    """One readable line from import_bundles' counts (files, runs_added, runs_skipped, samples_added)."""
    text = (
        f"Imported {_count(counts.get('runs_added', 0), 'run')} with "
        f"{_count(counts.get('samples_added', 0), 'sample')} from {_count(counts.get('files', 0), 'file')}"
    )
    skipped = counts.get("runs_skipped", 0)
    if skipped:
        text += f"; {_count(skipped, 'run')} already stored, kept once"
    differing = counts.get("runs_differing") or []
    if differing:
        shown = "; ".join(differing[:5]) + (f"; … and {len(differing) - 5} more" if len(differing) > 5 else "")
        text += (
            f"; {len(differing)} of them differ from the stored copy, which was kept "
            f"(run id: first differing field): {shown}"
        )
    return text + "."
