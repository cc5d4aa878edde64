"""The results store: one SQLite database (database.py, the Store class — the only owner of the SQL),
its schema and forward migrations (schema.py), run filters and DataFrames (queries.py), and export
bundles (bundle.py). Other parts use the names below, never the modules' internals."""

from dashbench.store.database import (  # noqa: F401  (the store's public face)
    BundleError,
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
from dashbench.store.schema import FINAL, STATUSES, TERMINAL  # noqa: F401
