"""`prices`: show the price catalog; `prices set` / `prices reset` edit your overrides in the store."""

from __future__ import annotations

import argparse
import math
import sys

from dashbench.cli import strict_json
from dashbench.cli.db_args import db_path_arg
from dashbench.cli.terminal import shown
from dashbench.core.spec import SpecError, ascii_int
from dashbench.costs import prices


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "prices",
        help="price catalog: shipped prices and your overrides",
        description="List prices (shipped defaults merged with your overrides from the store).",
    )
    parser.add_argument("--json", action="store_true", help="print the catalog as JSON")
    parser.add_argument(
        "--db", type=db_path_arg, default=None, help="results database (default: $DASHBENCH_DB or ~/.local/share)"
    )
    parser.set_defaults(func=_list)
    actions = parser.add_subparsers(dest="prices_action", required=False)

    set_parser = actions.add_parser(
        "set",
        help="add or override a price",
        description=(
            "Add a price, or override a shipped one (same device, unit and provider, or the same --key). "
            "Use --device CPU for this machine."
        ),
    )
    set_parser.add_argument("--device", required=True, help="accelerator (V100, TPU v5e, CPU, ...) or a VM name")
    set_parser.add_argument("--unit", required=True, help=f"billing unit, one of: {', '.join(prices.UNITS)}")
    set_parser.add_argument("--on-demand", required=True, help="on-demand USD per hour per unit")
    set_parser.add_argument("--spot", default=None, help="spot / preemptible USD per hour per unit")
    set_parser.add_argument("--chips", default=None, help="chips or GPUs in one unit (a TPU v2-8 board: 4)")
    set_parser.add_argument("--provider", default=None, help="e.g. GCP, AWS (default: user; for CPU: this machine)")
    set_parser.add_argument("--region", default=None)
    set_parser.add_argument("--source", default=None, help="where the price comes from (default: user override)")
    set_parser.add_argument("--key", default=None, help="row key; default: the row it overrides, or a new one")
    set_parser.add_argument("--db", type=db_path_arg, default=argparse.SUPPRESS, help="results database")
    set_parser.set_defaults(func=_set)

    reset_parser = actions.add_parser("reset", help="remove your overrides (all, or one with --key)")
    reset_parser.add_argument("--key", default=None, help="remove only this override")
    reset_parser.add_argument("--db", type=db_path_arg, default=argparse.SUPPRESS, help="results database")
    reset_parser.set_defaults(func=_reset)


def _writes(handler):
    """`prices set` / `prices reset`: refused in read-only mode; a database that cannot be written
    (a read-only file, a lock held too long) is one `db:` line, exit 2."""
    import functools

    @functools.wraps(handler)
    def wrapped(args) -> int:
        from dashbench.cli.db_args import one_field, read_only_requested
        from dashbench.store import StoreError

        try:
            if read_only_requested(args):
                raise SpecError(
                    "db", "cannot change prices: read-only mode (DASHBENCH_READ_ONLY=1) never writes to the database"
                )
            return handler(args)
        except StoreError as exc:
            raise SpecError("db", one_field(str(exc))) from None

    return wrapped


def _open_store(db, read_only: bool):
    from dashbench.cli.db_args import one_field
    from dashbench.store import Store, StoreError, database_file_exists, default_db_path

    path = db or default_db_path()
    try:
        if read_only and not database_file_exists(path):
            return None
        return Store(path, read_only=read_only)
    except StoreError as exc:
        raise SpecError("db", one_field(str(exc))) from None


def _list(args) -> int:
    store = _open_store(args.db, read_only=True)
    try:
        frame = prices.catalog(store)
    finally:
        if store is not None:
            store.close()
    skipped = frame.attrs.get("skipped_overrides")
    if skipped:  # on stderr, so --json stays JSON
        print(
            f"warning: {len(skipped)} stored price override{'s' if len(skipped) != 1 else ''} left out, "
            f"outside today's bounds (set it again or `prices reset --key KEY`): {shown('; '.join(skipped))}",
            file=sys.stderr,
        )
    if args.json:
        records = [{k: _json_value(v) for k, v in row.items()} for row in frame.to_dict("records")]
        print(strict_json.dumps(records, indent=2))
        return 0
    print(format_table(frame))
    return 0


def _json_value(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def format_table(frame) -> str:
    header = ("key", "device", "provider", "unit", "chips", "on-demand $/h", "spot $/h", "as of", "origin")
    lines = []
    for _, row in frame.iterrows():
        lines.append(
            tuple(
                shown(cell)
                for cell in (
                    row["key"] + ("*" if row["unconfirmed"] else ""),
                    row["device"],
                    row["provider"],
                    row["unit"],
                    str(row["chips_per_unit"]),
                    _money(row["on_demand_usd_per_hour"]),
                    _money(row["spot_usd_per_hour"]),
                    row["as_of"],
                    row["origin"],
                )
            )
        )
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    out += ["  ".join(c.ljust(w) for c, w in zip(line, widths)) for line in lines]
    out.append("* unconfirmed figure (see the note in `prices --json`); prices are defaults to edit, not the truth")
    return "\n".join(out)


def _money(value) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:g}"


def _int_or_none(name: str, text):
    if text is None:
        return None
    try:
        return ascii_int(text)
    except ValueError:
        shown_text = repr(text) if len(text) <= 40 else f"{text[:20]!r}… ({len(text)} characters)"
        raise SpecError(name, f"must be an integer >= 1, got {shown_text}") from None


@_writes
def _set(args) -> int:
    store = _open_store(args.db, read_only=False)
    try:
        current = prices.catalog(store)
        row = prices.override_row(
            device=args.device,
            unit=args.unit,
            on_demand=args.on_demand,
            spot=args.spot,
            chips=_int_or_none("chips_per_unit", args.chips),
            provider=args.provider,
            source=args.source,
            region=args.region,
            key=args.key,
            current=current,
        )
        replaced = current[current["key"] == row["key"]]
        store.set_price_override(prices.store_row(row))
    finally:
        store.close()
    if prices.spot_warning(row):
        print(f"warning: {shown(prices.spot_warning(row))}", file=sys.stderr)
    spot = "" if row["spot_usd_per_hour"] is None else f", spot ${row['spot_usd_per_hour']:g}/h"
    chips = f" of {row['chips_per_unit']} chips" if row["chips_per_unit"] > 1 else ""
    what = f"{row['device']} per {row['unit']}{chips}"
    if len(replaced) and replaced.iloc[0]["origin"] == "shipped":
        status = "overrides the shipped price"
    elif len(replaced):
        status = "replaces your earlier price"
    else:
        status = "new price"
    print(shown(f"{row['key']}: {what} on-demand ${row['on_demand_usd_per_hour']:g}/h{spot} — {status}"))
    return 0


@_writes
def _reset(args) -> int:
    store = _open_store(args.db, read_only=False)
    try:
        if args.key:
            if not store.delete_price_override(args.key):
                keys = [r["key"] for r in store.price_overrides()]
                raise SpecError("key", f"no override {args.key!r}; your overrides: {', '.join(keys) or 'none'}")
            print(f"removed your price {shown(args.key)}; the shipped price applies again where there is one")
        else:
            count = store.reset_price_overrides()
            print(f"removed {count} override{'s' if count != 1 else ''}; shipped prices apply")
    finally:
        store.close()
    return 0
