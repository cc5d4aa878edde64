"""The store's errors: each says in one line what is wrong with the database and, where there is one, the fix."""

from __future__ import annotations

import re


class StoreError(RuntimeError):
    """A problem with the database itself, said in one line."""


class ReadOnlyError(StoreError):
    """A write was attempted on a store opened read-only, or on a database this user cannot write."""


class StoreBusyError(StoreError):
    """Another process held the write lock for longer than this store waits."""


class SchemaVersionError(StoreError):
    """The database was written by a newer dashbench; it is left exactly as it is."""


class BundleError(StoreError):
    """An export bundle that cannot be imported; the message says which file and what is wrong."""


class RollBack(Exception):
    """Ends a write transaction that only checked something, undoing it."""


class StoreUnreachable(StoreError):
    """The server cannot be reached now (down, restarting, a dropped link): the same call may work later."""


# A message that already names its field ("run_id: …", "db: …", "out: …") is said as it is.
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*: ")


def db_line(exc: StoreError) -> str:
    """A StoreError as the one line a command prints after `error: `: a refusal of the database itself
    (its rights, its mode, its lock, its server, a driver's error under it) as `db: …`; a message that
    names its own field (`run_id: no run …`), or a bundle's, as it is."""
    text = " ".join(str(exc).split())
    if _FIELD.match(text) or isinstance(exc, BundleError):
        return text
    if isinstance(exc, (ReadOnlyError, StoreBusyError, SchemaVersionError)) or _from_driver(exc):
        return f"db: {text}"
    return text


def _from_driver(exc: BaseException) -> bool:
    # A StoreError raised while handling the driver's error (`raise … from None` still records it).
    context = exc.__cause__ or exc.__context__
    module = type(context).__module__ if context is not None else ""
    return module.split(".")[0] in ("psycopg", "sqlalchemy", "sqlite3")
