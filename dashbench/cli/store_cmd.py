"""`store copy --from A --to B`: one store's runs (with samples), price overrides, calibrations and
first CPU probes into another — a local SQLite file into the team's PostgreSQL store, or the team
store into a file to take home. Only the Store's public methods; a second copy adds nothing."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from dashbench.cli.terminal import shown
from dashbench.core.spec import SpecError
from dashbench.store.urls import masked, scrub

# Runs travel in batches, each one import transaction: memory stays bounded on a 100k-run store,
# and a copy cut short keeps what it wrote and is finished by running it again.
BATCH = 200


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "store",
        help="work on a whole store: copy one into another",
        description="Work on a whole results store (a SQLite file or a postgresql+psycopg:// URL).",
    )
    actions = parser.add_subparsers(dest="store_action", required=True)
    copy = actions.add_parser(
        "copy",
        help="copy runs, prices, calibrations and first CPU probes into another store",
        description=(
            "Copy every ended run (with its samples), the price overrides, the calibrations and the "
            "first CPU probes (with their times and runs) of --from into --to (created if it is a new "
            "file). A run, price, calibration or first probe already in --to is kept as it is there, "
            "so a second copy adds nothing. "
            "Runs still queued or running are left out: copy again once they end."
        ),
    )
    copy.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="STORE",
        help="the store to read: a SQLite file, or postgresql+psycopg://user@host:5432/dbname",
    )
    copy.add_argument(
        "--to", dest="target", required=True, metavar="STORE", help="the store to write into (the same forms)"
    )
    copy.set_defaults(func=_copy)
    upgrade = actions.add_parser(
        "upgrade",
        help="bring a store to this dashbench's schema (or make an empty database a store)",
        description=(
            "Upgrade the store named by --db (default: $DASHBENCH_DB) to this dashbench's schema in "
            "one transaction, as opening it for writing does; two processes never both upgrade it "
            "(SQLite's write lock, PostgreSQL's advisory lock). A store newer than this dashbench is "
            "refused and left as it is. A store made before alembic ran the schema's steps is "
            "stamped at the version it holds. For a store that read-only readers must find upgraded."
        ),
    )
    from dashbench.cli.db_args import add_db_argument

    add_db_argument(upgrade)
    upgrade.set_defaults(func=_upgrade)


def _upgrade(args) -> int:
    from dashbench.store import Store, StoreError, default_db_path, location, migrate

    where = location(args.db) if args.db else default_db_path()
    try:
        # Opening a store behind the code runs alembic's revisions (under the lock); this then stamps a
        # store from before alembic at its version, so later revisions start from the right place.
        with Store(where) as store:
            before, after = store.schema_upgrade or migrate.upgrade_store(store)
            done = f"upgraded from v{before}" if before != after else "nothing to upgrade"
            print(f"{store.path}: schema v{store.schema_version}, this dashbench's ({done})")
    except StoreError as exc:
        from dashbench.cli.db_args import one_field

        raise SpecError("db", one_field(str(exc))) from None
    return 0


def _scrub(message: str, stores: tuple[str, ...]) -> str:
    """An error's text without any password of the stores named: a driver may quote the URL."""
    for text in stores:
        message = scrub(message, str(text))
    return message


def _open(text: str, field: str, read_only: bool, upgrade_hint: bool = False):
    from dashbench.cli.db_args import one_field
    from dashbench.store import Store, StoreError, schema

    if not text.strip():
        raise SpecError(field, "give a SQLite file path or a postgresql+psycopg:// URL (an empty one is refused)")
    try:
        return Store(text, read_only=read_only)
    except StoreError as exc:
        message = one_field(str(exc))
        if upgrade_hint and "run `dashbench store upgrade` first" in message:
            message = message.replace(
                "run `dashbench store upgrade` first",
                "upgrade it first (then only a "
                f"dashbench at v{schema.SCHEMA_VERSION} opens it): python -m dashbench "
                f"store upgrade --db '{masked(text)}'",
            )
        raise SpecError(field, message) from None


@contextlib.contextmanager
def _source(text: str):
    """--from, read-only; one at an older schema read through a copy upgraded in a temporary folder (an
    SQLite file), or named with the command that upgrades it (a server's database, too big to copy)."""
    from dashbench.store import StoreError, migrate, url_scheme

    if url_scheme(text) or not text.strip():
        with _open(text, "from", read_only=True, upgrade_hint=True) as store:
            yield store
        return
    with tempfile.TemporaryDirectory(prefix="dashbench-copy-") as folder:
        try:
            upgraded = migrate.upgraded_copy(Path(text).expanduser(), folder)
        except StoreError as exc:
            raise SpecError("from", str(exc)) from None
        with _open(str(upgraded) if upgraded else text, "from", read_only=True) as store:
            yield store


def _same_store(source: str, target: str) -> bool:
    from dashbench.store import url_scheme

    if url_scheme(source) or url_scheme(target):
        return _server_and_database(source) == _server_and_database(target)
    a, b = Path(source).expanduser(), Path(target).expanduser()
    try:
        return a.resolve() == b.resolve() or (b.exists() and a.samefile(b))
    except OSError:
        return False


def _server_and_database(text: str) -> str:
    """A URL without its user and password: two roles on one database are one store."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(text).set(username=None, password=None).render_as_string()
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy reads: the Store refuses it when opened
        return masked(text)


def _database_errors() -> tuple:
    """What a database can raise mid-copy (a lost connection, a full disk): one line, not a traceback."""
    import sqlite3

    try:
        from psycopg import Error as DriverError  # raised unwrapped by a pool's raw connection
        from sqlalchemy.exc import SQLAlchemyError
    except ImportError:  # pragma: no cover - pinned in requirements-app.txt
        return sqlite3.Error, OSError
    return sqlite3.Error, OSError, SQLAlchemyError, DriverError


def _copy(args) -> int:
    from dashbench.cli.db_args import one_field, refuse_if_read_only
    from dashbench.store import StoreError

    stores = (args.source, args.target)
    try:
        refuse_if_read_only(args, "copy into --to")
        if _same_store(args.source, args.target):
            raise SpecError("to", f"{masked(args.target)} is the store given as --from; copy into another one")
        with _source(args.source) as source, _open(args.target, "to", read_only=False) as target:
            report = copy_store(_Side(source, "from"), _Side(target, "to"))
    except _SideFailed as exc:
        raise SpecError(exc.side, _scrub(exc.line, stores)) from None
    except SpecError as exc:
        raise SpecError(exc.field, _scrub(str(exc).split(": ", 1)[1], stores)) from None
    except (StoreError, ValueError) as exc:  # the target refused a write (read-only, locked, full)
        raise SpecError("to", _scrub(one_field(str(exc)), stores)) from None
    except _database_errors() as exc:
        raise SpecError(
            "to",
            _scrub(
                f"the copy stopped: {' '.join(str(exc).split()) or type(exc).__name__}; "
                f"what was copied is kept, run the copy again to finish",
                stores,
            ),
        ) from None
    print(shown(f"copied {masked(args.source)} into {masked(args.target)}"))
    for line in report_lines(report):
        print(shown(line))
    return 0


class _SideFailed(Exception):
    """A store of the copy failed mid-way: `side` ("from" or "to") names which, `line` says what."""

    def __init__(self, side: str, line: str):
        super().__init__(line)
        self.side, self.line = side, line


class _Side:
    """A store of the copy whose failures name its side (--from or --to): a read that the source's server
    refused and a write the target's refused say different things to do."""

    def __init__(self, store, side: str):
        self._store, self._side = store, side

    def __getattr__(self, name: str):
        from dashbench.cli.db_args import one_field
        from dashbench.store import StoreError, db_line

        method = getattr(self._store, name)

        def call(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except StoreError as exc:
                raise _SideFailed(self._side, one_field(db_line(exc))) from None
            except _database_errors() as exc:
                raise _SideFailed(
                    self._side,
                    f"the copy stopped: {' '.join(str(exc).split()) or type(exc).__name__}; "
                    f"what was copied is kept, run the copy again to finish",
                ) from None

        return call


def copy_store(source, target) -> dict:
    """Copy what `source` holds into `target`; returns what was added, kept and left out."""
    report = {
        "runs_added": 0,
        "runs_kept": 0,
        "samples_added": 0,
        "runs_differing": [],
        "runs_active": 0,
        "runs_unreadable": [],
    }
    ids = list(reversed(source.run_ids()))  # oldest first, as a bundle carries them
    for start in range(0, len(ids), BATCH):
        runs = []
        for run in source.export_rows(run_ids=ids[start : start + BATCH]):
            checked = _importable(run, report)
            if checked is not None:
                runs.append(checked)
        counts = target.import_rows(runs)
        report["runs_added"] += counts["runs_added"]
        report["runs_kept"] += counts["runs_skipped"]
        report["samples_added"] += counts["samples_added"]
        report["runs_differing"] += counts["runs_differing"]
    report.update(_copy_prices(source, target))
    report.update(_copy_calibrations(source, target))
    report.update(_copy_first_probes(source, target))
    return report


class _Unreadable(Exception):
    pass


def _importable(run: dict, report: dict) -> dict | None:
    """A stored run in import_rows' form, checked as a bundled run is; None (and counted) when it is
    still going or cannot be read."""
    from dashbench.store import ACTIVE, bundle

    if run["status"] in ACTIVE:
        report["runs_active"] += 1
        return None
    if run.get("unreadable"):
        report["runs_unreadable"].append(f"{run['run_id']}: {run['unreadable']}")
        return None
    try:
        # The bundle's checks: a copied run is exactly what `import` would have taken.
        return bundle.check_run({name: run.get(name) for name in bundle.RUN_FIELDS}, 0, _Unreadable)
    except _Unreadable as exc:
        report["runs_unreadable"].append(str(exc).replace("run #0 ", "", 1))
        return None


def _copy_prices(source, target) -> dict:
    """Each override whose key the target lacks; a key the target has keeps the target's price."""
    from dashbench.store import schema

    theirs = {row["key"]: row for row in target.price_overrides()}
    added, differing, unreadable = 0, [], []
    compared = [c for c in schema.PRICE_COLUMNS if c != "origin"]
    for row in source.price_overrides():
        if row["key"] in theirs:
            if any(row.get(c) != theirs[row["key"]].get(c) for c in compared):
                differing.append(row["key"])
            continue
        try:
            target.set_price_override({c: row.get(c) for c in schema.PRICE_COLUMNS})
        except ValueError as exc:  # a row the store would not take today (a required column empty)
            unreadable.append(f"price override {row['key']}: {exc}")
            continue
        added += 1
    return {"prices_added": added, "prices_differing": differing, "prices_unreadable": unreadable}


def _calibration_key(row: dict) -> tuple:
    return round(float(row["created_at"]), 3), row["host"], row["device"], row["backend"], row["verdict"]


def _copy_calibrations(source, target) -> dict:
    """Each calibration the target lacks (the same time, host, device, backend and verdict), oldest first."""
    have = {_calibration_key(row) for row in target.calibrations()}
    added, unreadable = 0, []
    for row in reversed(source.calibrations()):
        try:
            key = _calibration_key(row)
            if key in have:
                continue
            target.add_calibration(row)
        except (TypeError, ValueError) as exc:
            unreadable.append(f"calibration {row.get('id')}: {exc}")
            continue
        have.add(key)
        added += 1
    return {"calibrations_added": added, "calibrations_unreadable": unreadable}


def _copy_first_probes(source, target) -> dict:
    """Each first CPU probe (host, backend, dtype) the target lacks, with its created_at and run_id; one
    the target has keeps the target's (named when its rate differs)."""
    theirs = {_probe_key(row): row for row in target.first_cpu_probes()}
    added, differing, unreadable = 0, [], []
    for row in source.first_cpu_probes():
        key = _probe_key(row)
        if key in theirs:
            if row["tflops"] != theirs[key]["tflops"]:
                differing.append("/".join(key))
            continue
        try:
            added += target.add_first_cpu_probes([row])  # checked alone: a bad row does not stop the others
        except ValueError as exc:
            unreadable.append(f"first CPU probe {'/'.join(map(str, key))}: {exc}")
    return {"probes_added": added, "probes_differing": differing, "probes_unreadable": unreadable}


def _probe_key(row: dict) -> tuple:
    return row["host"], row["backend"], row["dtype"]


def report_lines(report: dict) -> list[str]:
    lines = [
        f"runs: {report['runs_added']} added ({report['samples_added']} samples), "
        f"{report['runs_kept']} already there and kept",
        f"price overrides: {report['prices_added']} added; calibrations: {report['calibrations_added']} added; "
        f"first CPU probes: {report['probes_added']} added",
    ]
    if report["runs_active"]:
        lines.append(f"runs still queued or running, left out: {report['runs_active']} (copy again once they end)")
    for difference in report["runs_differing"]:
        run_id, field = difference.split(": ", 1)
        lines.append(f"run {run_id}: the target's copy differs in {field}; kept the target's")
    for key in report["prices_differing"]:
        lines.append(f"kept the target's price override {key} (the source's differs)")
    for key in report["probes_differing"]:
        lines.append(f"kept the target's first CPU probe {key} (the source's differs)")
    for what in (
        report["runs_unreadable"]
        + report["prices_unreadable"]
        + report["calibrations_unreadable"]
        + report["probes_unreadable"]
    ):
        lines.append(f"left out, unreadable: {what}")
    return lines
