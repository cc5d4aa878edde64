"""`list`, `show`, `delete`, `export`, `import`: the stored runs from the command line."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

import pandas as pd

from dashbench.cli import strict_json
from dashbench.cli.db_args import add_db_argument, read_only_requested, refuse_if_read_only, reports_store_errors
from dashbench.cli.run_table import format_table, records
from dashbench.cli.terminal import fit, shown, shown_tree, terminal_width
from dashbench.core.spec import BACKENDS, MAX_INT32, ascii_int
from dashbench.store import (
    STATUSES,
    SchemaVersionError,
    Store,
    StoreError,
    database_file_exists,
    default_db_path,
    export_bundle,
    import_bundles,
    location,
    short_id,
    unreadable_text,
)


def register(subparsers) -> None:
    p = subparsers.add_parser("list", help="list stored runs, newest first")
    add_db_argument(p, read_only_option=True)
    _add_filters(p)
    p.add_argument("--json", action="store_true", help="JSON records (with cost columns)")
    p.add_argument(
        "--wide",
        action="store_true",
        help="every column and the full run ids, however wide the terminal (what a pipe or file gets)",
    )
    p.set_defaults(func=cmd_list)

    p = subparsers.add_parser("show", help="one run in full")
    add_db_argument(p, read_only_option=True)
    p.add_argument("run_id", help="run id (a unique prefix is enough)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = subparsers.add_parser("delete", help="delete runs and their samples")
    add_db_argument(p)
    p.add_argument("run_ids", nargs="+", metavar="RUN_ID")
    p.add_argument("--force", action="store_true", help="also delete runs that are queued or running")
    p.set_defaults(func=cmd_delete)

    p = subparsers.add_parser("export", help="write runs to a bundle file for another machine")
    add_db_argument(p, read_only_option=True)
    _add_filters(p)
    p.add_argument(
        "--out",
        required=True,
        help="bundle file to write (JSON; - for stdout; an existing file only "
        "with --force, never an SQLite file; a FIFO or device is written through)",
    )
    p.add_argument("--force", action="store_true", help="replace the --out file if it exists")
    p.set_defaults(func=cmd_export)

    p = subparsers.add_parser("import", help="merge bundle files into the database")
    add_db_argument(p)
    p.add_argument("files", nargs="+", metavar="FILE")
    p.set_defaults(func=cmd_import)


def _add_filters(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("filters (comma-separated values match any of them)")
    for name in ("model", "device", "accelerator", "precision", "label", "host"):
        group.add_argument(f"--{name}", default=None)
    group.add_argument("--backend", default=None, help=f"Keras backend: {', '.join(BACKENDS)}")
    group.add_argument("--batch-size", default=None, help="e.g. 32,64")
    group.add_argument("--status", default=None, help=", ".join(STATUSES))
    group.add_argument("--sweep", dest="sweep_id", default=None, help="sweep id")
    group.add_argument("--since", default=None, help="date or time, e.g. 2025-01-31")
    group.add_argument("--until", default=None, help="date or time (a date includes that whole day)")
    group.add_argument("--limit", default=None, help=f"at most N runs (1 to {MAX_INT32})")


def filters_from_args(args) -> dict:
    filters = {}
    for name in ("model", "device", "backend", "accelerator", "precision", "label", "host", "status", "sweep_id"):
        value = getattr(args, name, None)
        if value is not None:
            filters[name] = [v.strip() for v in value.split(",") if v.strip()]
    for value in filters.get("backend", []):
        if value not in BACKENDS:
            raise ValueError(f"backend: unknown backend {value!r}; choose one of: {', '.join(BACKENDS)}")
    if getattr(args, "batch_size", None) is not None:
        filters["batch_size"] = [
            _bounded_int("batch_size", v, "whole numbers separated by commas, each")
            for v in args.batch_size.split(",")
            if v.strip()
        ]
    if getattr(args, "limit", None) is not None:
        filters["limit"] = _bounded_int("limit", args.limit, "a whole number")
    for name in ("since", "until"):
        if getattr(args, name, None) is not None:
            filters[name] = getattr(args, name)
    return filters


def _bounded_int(name: str, text: str, what: str) -> int:
    """A filter's integer within run's bounds (1 to MAX_INT32): beyond them SQLite overflows, and a
    negative --limit would mean "no limit" to SQLite."""
    try:
        value = ascii_int(text)
    except ValueError:
        value = None
    if value is None or not 1 <= value <= MAX_INT32:
        shown = text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"
        raise ValueError(f"{name}: must be {what} from 1 to {MAX_INT32}, got {shown!r}")
    return value


DEVICE_KINDS = ("cpu", "gpu", "tpu", "auto")


def resolve_device_filters(filters: dict, store: Store) -> dict:
    """--device takes a device kind (cpu, gpu, tpu; any case) or an accelerator name as `list` shows
    it (CPU, V100, TPU v3; any case); --accelerator takes accelerator names in any case. An unknown
    value is an error that lists the values there are, not an empty table."""
    from dashbench.hardware import peaks

    filters = dict(filters)
    device_values = filters.pop("device", None)
    accel_values = filters.pop("accelerator", None)
    stored = [a for a in store.distinct("accelerator") if a]
    names = {a.lower(): a for a in [*peaks.table(), *stored]}

    def unknown(field: str, value: str) -> ValueError:
        kinds = f"a device kind ({', '.join(DEVICE_KINDS[:3])}) or " if field == "device" else ""
        return ValueError(
            f"{field}: no such device {value!r}; use {kinds}an accelerator name (any case) — in this "
            f"database: {', '.join(sorted(set(stored))) or 'none yet'}; known: {', '.join(peaks.table())}"
        )

    kinds, accelerators = [], []
    for value in device_values or []:
        if value.lower() in DEVICE_KINDS:
            kinds.append(value.lower())
        elif value.lower() in names:
            accelerators.append(names[value.lower()])
        else:
            raise unknown("device", value)
    if kinds and accelerators:
        raise ValueError("device: give device kinds (cpu, gpu, tpu) or accelerator names (CPU, V100, …), not both")
    chosen = set(accelerators) if accelerators else None
    for value in accel_values or []:
        if value.lower() not in names:
            raise unknown("accelerator", value)
    if accel_values is not None:
        wanted = {names[v.lower()] for v in accel_values}
        chosen = wanted if chosen is None else chosen & wanted
    if kinds:
        filters["device"] = kinds
    if chosen is not None:
        filters["accelerator"] = sorted(chosen)  # an empty list matches nothing
    return filters


def _open(args, must_exist: bool = True, write: str | None = None) -> Store | None:
    """The store for a command. Reading (`write` None): read-only mode opens it with SQLite's
    mode=ro and writes nothing; otherwise runs whose process died are reconciled first, and a file
    this user cannot write is shown as it is. Writing (`write`: what, for the error line): refused
    in read-only mode, and a read-only file is one line naming it."""
    path = location(args.db) if args.db else default_db_path()
    if write is not None:
        refuse_if_read_only(args, write)
    exists = database_file_exists(path)  # a folder, or one that cannot be read: one line, not a traceback
    if must_exist and not exists:
        return None
    if write is None and read_only_requested(args):
        return Store(path, read_only=True)
    try:
        store = Store(path)
    except SchemaVersionError:
        raise
    except StoreError:
        if write is None and must_exist and exists:  # a file we may read but not write
            return Store(path, read_only=True)
        raise
    try:
        store.reconcile()  # a run whose process died shows as interrupted, not forever running
    except StoreError:
        if write is not None:
            store.close()
            raise
        store.close()
        return Store(path, read_only=True)
    return store


def with_costs(frame: pd.DataFrame, store: Store) -> pd.DataFrame:
    """Cost columns from dashbench.costs, when that part is installed; a run without a matching
    price gets price_note "no price"."""
    try:
        from dashbench.costs import prices, run_cost
    except ImportError:
        return frame
    return run_cost.add_cost_columns(frame, prices.catalog(store))


@reports_store_errors
def cmd_list(args) -> int:
    filters = filters_from_args(args)
    store = _open(args)
    if store is None:
        print("[]" if args.json else f"no runs yet (no database at {shown(args.db or default_db_path())})")
        return 0
    with store:
        frame = store.runs(**resolve_device_filters(filters, store))
        if unreadable_text(frame):  # on stderr, so `list --json` stays JSON
            print(f"warning: {shown(unreadable_text(frame))}", file=sys.stderr)
        frame = with_memory(frame, store)  # and each to-accuracy run's columns (accuracy_text)
        if args.json:
            frame = with_costs(frame, store)
            print(strict_json.dumps(records(frame)))
            return 0
    if frame.empty:
        print("no runs match")
        return 0
    print(format_table(frame, width=None if args.wide else terminal_width()))
    return 0


def with_memory(frame: pd.DataFrame, store: Store) -> pd.DataFrame:
    """The frame with each run's measured peak memory (memory.MEMORY_COLUMNS) and, for to-accuracy runs,
    time to target and the rest of accuracy_text.ACCURACY_COLUMNS, read from its result."""
    from dashbench.results import accuracy_text
    from dashbench.store import WITH_RESULT
    from dashbench.workloads import memory

    def result_of(run_id, status):
        run = store.get_run(run_id) if status in WITH_RESULT else None
        return run["result"] if run else None

    results = [result_of(run_id, status) for run_id, status in zip(frame["run_id"], frame["status"])]
    columns = {**memory.memory_columns(results), **accuracy_text.accuracy_columns(results)}
    return frame.assign(
        **{
            name: pd.array(values, dtype="Float64").astype(float) if len(values) else []
            for name, values in columns.items()
        }
    )


@reports_store_errors
def cmd_show(args) -> int:
    store = _open(args)
    if store is None:
        raise StoreError(f"run_id: no run {args.run_id!r}: no database at {args.db or default_db_path()}")
    with store:
        run = store.get_run(store.resolve_run_id(args.run_id))
        samples = store.samples(run["run_id"])
        cost = cost_to_target(run["result"], store)
    if args.json:
        run["result"] = run["result"].to_dict() if run["result"] else None
        run["samples"] = json.loads(samples.to_json(orient="records"))
        if cost is not None:
            run["cost_to_target"] = cost
        print(strict_json.dumps(run, indent=2, default=str))
        return 0
    print(fit(describe_run(run, samples, cost), terminal_width()))
    return 0


def cost_to_target(result, store: Store) -> dict | None:
    """A to-accuracy run that reached its target: the median time to target at the on-demand price of the
    catalog row its device matches, as Compare prices it (None for any other run). `usd` is None, with
    `price_note`, where no row matches."""
    from dashbench.results import accuracy_text

    seconds = accuracy_text.columns_of(getattr(result, "accuracy", None))["time_to_target_s"]
    if seconds is None:
        return None
    price = None
    with contextlib.suppress(ImportError):
        from dashbench.costs import prices, run_cost

        price = run_cost.match_price(
            result.accelerator, result.accelerator_count, prices.catalog(store), (result.env or {}).get("cpu_count")
        )
    if price is None:
        return {
            "usd": None,
            "time_to_target_s": seconds,
            "usd_per_hour": None,
            "price_key": None,
            "price_note": "no price",
        }
    return {
        "usd": seconds * price["usd_per_hour"] / 3600.0,
        "time_to_target_s": seconds,
        "usd_per_hour": price["usd_per_hour"],
        "price_key": price["key"],
        "price_note": None,
    }


def describe_run(run: dict, samples: pd.DataFrame, cost: dict | None = None) -> str:
    # Every stored text escaped (terminal.py): a host, label or error forges no line, sends no escape.
    run = shown_tree(run)
    spec, result = run["spec"], run["result"]
    if result is not None:
        result = type(result).from_dict(shown_tree(result.to_dict()))
    lines = [
        f"run {run['run_id']} ({short_id(run['run_id'])} in the dashboard): {run['status']}"
        + (f" ({run['error']})" if run["error"] else "")
    ]
    context = [f"{k} {run[k]}" for k in ("sweep_id", "label", "host", "pid") if run.get(k)]
    if context:
        lines.append("  " + ", ".join(context))
    lines.append(f"  created {run['created_at']}  started {run['started_at']}  finished {run['finished_at']}")
    lines.append("  backend: " + backend_text(spec, result))
    lines.append("  spec: " + " ".join(f"{k}={v}" for k, v in spec.items() if v is not None))
    if result is not None:
        # The first line already names the run; its id need not come twice.
        lines += ["  " + line for line in result.replace(run_id=None).describe().splitlines()]
        lines += accuracy_lines(spec, result)
        if cost is not None:
            lines.append(
                "  cost to target: "
                + (
                    f"${cost['usd']:,.4g} at {cost['price_key']} (${cost['usd_per_hour']:,.4g}/h, on-demand)"
                    if cost["usd"] is not None
                    else "no price for this device (set one: python -m dashbench prices set …)"
                )
            )
    if len(samples):
        warm = int(samples["warmup"].sum())
        losses = samples["loss"].dropna()
        loss = f", loss {losses.iloc[0]:.4g} → {losses.iloc[-1]:.4g}" if len(losses) else ""
        lines.append(f"  {len(samples)} samples stored ({warm} warm-up){loss}")
    return "\n".join(lines)


def accuracy_lines(spec: dict, result) -> list[str]:
    """A to-accuracy run's headline, its curve per seed and, for a preset's run, the article's times."""
    from dashbench.cli import article
    from dashbench.results import accuracy_text

    headline = accuracy_text.headline(result.accuracy)
    if not headline:
        return []
    lines = ["  to accuracy: " + headline[0], *("    " + line for line in headline[1:])]
    lines += ["  " + line for line in accuracy_text.curve_lines(result.accuracy)]
    lines += ["  " + line for line in article.article_lines(spec, result)]
    return lines


def backend_text(spec: dict, result) -> str:
    """'jax 0.10.2': the backend that ran (the spec's until a result exists) and its version."""
    name = result.backend_name() if result is not None else (spec.get("backend") or "tensorflow")
    version = result.backend_version if result is not None else None
    if version is None and result is not None and name == "tensorflow":
        version = result.env.get("tensorflow")  # written before backends: the env names it
    return f"{name} {version}" if version else name


@reports_store_errors
def cmd_delete(args) -> int:
    store = _open(args, write="delete runs")
    if store is None:
        raise StoreError(f"run_id: no database at {args.db or default_db_path()}")
    with store:
        ids = [store.resolve_run_id(r) for r in args.run_ids]
        if not args.force:
            for run_id in ids:
                status = store.get_run(run_id)["status"]
                if status in ("queued", "running"):
                    raise StoreError(f"run_id: run {run_id} is {status}; cancel it first, or pass --force")
        deleted = store.delete_runs(ids)
    print(f"deleted {deleted} run{'s' if deleted != 1 else ''}")
    return 0


@reports_store_errors
def cmd_export(args) -> int:
    filters = filters_from_args(args)
    store = _open(args)
    if store is None:
        raise StoreError(f"db: no database at {args.db or default_db_path()}")
    with store:
        count = export_bundle(store, args.out, replace=args.force, **resolve_device_filters(filters, store))
    # With --out - the bundle is stdout's only content; the count goes to stderr.
    print(
        f"exported {count} run{'s' if count != 1 else ''} to {'stdout' if args.out == '-' else shown(args.out)}",
        file=sys.stderr if args.out == "-" else sys.stdout,
    )
    return 0


@reports_store_errors
def cmd_import(args) -> int:
    refuse_if_read_only(args, "import runs")
    with Store(args.db) as store:
        counts = import_bundles(store, args.files)
    print(
        f"imported {counts['runs_added']} runs ({counts['samples_added']} samples) from {counts['files']} "
        f"file{'s' if counts['files'] != 1 else ''}; {counts['runs_skipped']} already present"
        + (f"; {counts['runs_completed']} stored without an end, completed" if counts.get("runs_completed") else "")
    )
    differing = counts.get("runs_differing") or []
    if differing:
        # Same run id, other content: the stored copy is kept; say so rather than skip in silence.
        listed = "; ".join(differing[:10]) + (f"; … and {len(differing) - 10} more" if len(differing) > 10 else "")
        print(
            f"warning: {len(differing)} of the runs already present differ from the stored copy, which was kept "
            f"(run id: first differing field): {shown(listed)}",
            file=sys.stderr,
        )
    return 0
