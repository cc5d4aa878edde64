"""The results store: an SQLite file or a PostgreSQL server behind one Store (database.py, the only owner
of the SQL, split by part: runs.py, samples.py, queue.py, prices.py). What differs between the databases is
one interface (backend.py, with the SQL fragments in dialect.py) implemented once per database, in
sqlite/ and postgres/; registry.py picks one by the location's URL scheme. Its schema (schema.py) and
forward migrations (alembic revisions in migrations/, run by migrate.py), run statuses and their allowed
moves (states.py), run filters and DataFrames (queries.py, which also judges which stored rows can be
read), the pages' bounded questions (browse.py), which errors are the store being away for a while
(outage.py), the change token their cache is keyed on (watch.py), reading without leaving -wal/-shm files
(sidecars.py), read-only mode asked for (read_only.py), a URL's password never shown (urls.py), and export bundles (bundle.py, on the Store's
public API). Other parts use the names below (bundles too: `export_bundle`, `import_bundles`), never the
modules."""

from dashbench.store.database import (  # noqa: F401  (the store's public face)
    BundleError,
    QueueClaim,
    ReadOnlyError,
    SchemaVersionError,
    ServerURL,
    Store,
    StoreBusyError,
    StoreError,
    database_file_exists,
    default_db_path,
    is_server_url,
    iso,
    location,
    masked,
    new_run_id,
    new_sweep_id,
    now,
    pid_alive,
    short_id,
    this_host,
    url_refusal,
    url_scheme,
)
from dashbench.store.errors import StoreUnreachable, db_line  # noqa: F401
from dashbench.store.outage import OUTAGE_ENV, PollWait, is_outage, outage_s  # noqa: F401
from dashbench.store.queries import unreadable_text  # noqa: F401
from dashbench.store.read_only import READ_ONLY_ENV, read_only_requested, refuse_if_read_only  # noqa: F401
from dashbench.store.states import ACTIVE, FINAL, STATUSES, TERMINAL, WITH_RESULT  # noqa: F401
from dashbench.store.urls import without_password  # noqa: F401

_BUNDLE_NAMES = ("export_bundle", "import_bundles", "read_bundle")


def __getattr__(name: str):
    # Bundle code loads on first use: opening and reading a database never needs it.
    if name in _BUNDLE_NAMES:
        from dashbench.store import bundle

        return getattr(bundle, name)
    raise AttributeError(f"module 'dashbench.store' has no attribute {name!r}")
