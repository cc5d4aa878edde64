"""Which database a store's location names, by its URL scheme, as MLflow's tracking-store registry
picks a store: a file path is an SQLite file, a `postgresql+psycopg://` URL (plain `postgresql://` and
`postgres://` mean it too: psycopg 3 is the one driver) a PostgreSQL server, any other scheme is refused.
Each database's backend is imported only when a store of it is opened."""

from __future__ import annotations

import os
from pathlib import Path

from dashbench.store.urls import ServerURL, url_scheme


def _sqlite():
    from dashbench.store.sqlite.backend import SQLiteBackend

    return SQLiteBackend


def _postgres():
    from dashbench.store.postgres.backend import PostgresBackend

    return PostgresBackend


# A scheme (lower case, without "://") -> the backend class of the server it names; a path has none.
SERVERS = {"postgresql+psycopg": _postgres, "postgresql": _postgres, "postgres": _postgres}
FILE = _sqlite
_SCHEMES_SAID = "postgresql+psycopg://user@host:5432/db or a file path (SQLite)"


def is_server_url(text) -> bool:
    """Whether `text` names a store on a server (an accepted URL), not a file."""
    scheme = url_scheme(text)
    return scheme is not None and scheme[:-3].lower() in SERVERS


def url_refusal(text) -> str | None:
    """The words that refuse a database URL of another scheme, or None (a path, or an accepted URL)."""
    scheme = url_scheme(text)
    if scheme is None or is_server_url(text):
        return None
    return f"a database URL {scheme}… is not accepted; give {_SCHEMES_SAID}"


def location(text) -> "Path | ServerURL":
    """What --db or DASHBENCH_DB names: a server's URL (a ServerURL: shown masked, never a Path,
    which would fold its "//") or a file path."""
    if isinstance(text, ServerURL) or is_server_url(text):
        return ServerURL(text)
    return Path(text).expanduser()


def default_db_path() -> "Path | ServerURL":
    env = os.environ.get("DASHBENCH_DB")
    if env:
        return location(env)
    return Path.home() / ".local" / "share" / "dashbench" / "dashbench.sqlite"


def backend_for(where):
    """The backend class (backend.Backend) of the database at a location (location()'s answer)."""
    if isinstance(where, ServerURL):
        return SERVERS[url_scheme(where.url)[:-3].lower()]()
    return FILE()


def database_file_exists(path: str | os.PathLike) -> bool:
    """Whether a database is at `path` (False: none yet). A folder, or a folder that cannot be
    looked into, is a StoreError naming it: never a traceback, never "read-only". A server's URL
    is a database that exists (the Store asks the server; a wrong address is its error)."""
    return backend_for(location(path)).exists(location(path))
