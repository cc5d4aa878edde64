"""The store's errors: each says in one line what is wrong with the database and, where there is one, the fix."""

from __future__ import annotations


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
