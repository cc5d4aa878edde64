"""The results store: one SQLite database (database.py, the Store class — the only owner of the SQL),
its schema and forward migrations (schema.py), run statuses and their allowed moves (states.py), run
filters and DataFrames (queries.py), and export bundles (bundle.py, on the Store's public API).
Other parts use the names below and `bundle`, never the modules' internals."""

from dashbench.store.database import (  # noqa: F401  (the store's public face)
    BundleError,
    QueueClaim,
    ReadOnlyError,
    SchemaVersionError,
    Store,
    StoreError,
    default_db_path,
    iso,
    new_run_id,
    new_sweep_id,
    now,
    pid_alive,
    this_host,
)
from dashbench.store.states import ACTIVE, FINAL, STATUSES, TERMINAL  # noqa: F401
