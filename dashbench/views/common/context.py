"""What app.py hands every page: settings and the open store, and the first screen of an empty store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dashbench.workloads import registry

# The quick try it suggests is the registry's recipe, as `models` prints it.
_QUICK = registry.get("fashion_mnist_cnn")
EMPTY_STORE_TEXT = f"""\
**No runs stored yet.** dashbench measures training throughput on this machine and keeps every
run next to the published figures.

1. Open **Run**, choose *{_QUICK.name}* on the CPU, tick **Quick try (tiny shapes)** and launch
   ({", ".join(f"{k.replace('_', ' ')} {v}" for k, v in _QUICK.quick_recipe().items())}: a few seconds),
   or pick one of the seed presets.
2. Or measure from a shell: `{_QUICK.quick_command()}`,
   or a sweep: `python -m dashbench sweep --model resnet50 --batch-sizes 32,64,128`.
3. Or bring results measured elsewhere: `python -m dashbench import results.json`
   (bundles made with `python -m dashbench export --out results.json`).

Then come back to **Compare** to see throughput, step time, cost and speed-up side by side.
"""

EMPTY_STORE_TEXT_READ_ONLY = """\
**No runs in this database yet.** This dashboard is read-only: measure on a machine with the
accelerator (`python -m dashbench run ...` or `sweep ...`), then copy the database here or
import a bundle (`python -m dashbench import bundle.json`) and reload.
"""


@dataclass
class AppContext:
    """What app.py hands the pages for one script run."""

    settings: Any
    store: Any
    store_error: str | None = None
    # Set when app.py's script run is over: a later run that did not go through app.py (a legacy page
    # run, pages_folder) finds this context in the session and must not take it for its own.
    ended: bool = False
    # The store's change token, read once per script run (ui.token): the shared caches' key.
    token: Any = None


# What a page shows while the team store's server cannot be reached (ui.open_page then tries again by itself).
OUTAGE_TEXT = "The team store is unreachable, retrying"


def outage_text(exc) -> str:
    """The page's line for a server that cannot be reached now (a StoreUnreachable): the outage, then why."""
    detail = str(exc)
    return f"{OUTAGE_TEXT} … ({detail[4:] if detail.startswith('db: ') else detail})"


def is_outage(message: str | None) -> bool:
    return bool(message) and message.startswith(OUTAGE_TEXT)


def open_store(settings) -> tuple[Any, str | None]:
    """(store, None) or (None, message): a missing read-only database is a message, not a traceback."""
    from dashbench.store import StoreError, StoreUnreachable, database_file_exists, url_refusal

    if url_refusal(settings.db_path):
        return None, (
            f"Cannot open the database: {url_refusal(settings.db_path)}. Set DASHBENCH_DB (or pass "
            "`-- --db PATH`) to a database file."
        )
    try:
        if settings.read_only and not database_file_exists(settings.db_path):
            return None, (
                f"No database at `{settings.db_path}`. Set DASHBENCH_DB (or pass `-- --db PATH`) to a "
                "dashbench database, or copy one there."
            )
    except StoreError as exc:  # a folder, or a folder that cannot be read
        return None, f"Cannot open the database `{settings.db_path}`: {exc}"
    try:
        return own_store(settings), None
    except StoreUnreachable as exc:  # a server down or restarting: the page says so and tries again
        return None, outage_text(exc)
    except Exception as exc:  # a broken or foreign file: say which and why instead of crashing every page
        return None, f"Cannot open the database `{settings.db_path}`: {exc}"


def own_store(settings):
    """A store handle of the caller's own, to use in a `with`: for a fragment or a widget callback, which
    run after app.py's script run has closed the AppContext's handle (SQLite handles are per thread)."""
    from dashbench.store import Store

    return Store(settings.db_path, read_only=settings.read_only)


def pump_jobs(settings) -> None:
    from dashbench.jobs import queue

    queue.pump(settings.db_path)
