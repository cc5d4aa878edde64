"""A write on PostgreSQL that another writer got in the way of, tried again: a deadlock or a serialization
failure (SQLSTATE 40P01, 40001: the server ended our transaction, nothing of it stored) is tried again a
few times from the start; a lock another writer holds is said as the wait starts ("waiting for the
database …", as on SQLite) and then waited for. The Store's writing methods are wrapped with `retried`;
each call is one whole transaction, so trying it again is trying the call again. SQLite needs none of
this: BEGIN IMMEDIATE takes its one write lock up front (sqlite/backend.py), where it says the same line.
"""

from __future__ import annotations

import functools
import random
import threading
import time

from dashbench.store.errors import StoreBusyError

# Tries of one call that the server ended as a deadlock or a serialization failure.
CONFLICT_TRIES = 5
# How long a first try waits for a lock before saying so and waiting the store's whole busy timeout.
NOTICE_AFTER_S = 0.5


class Retryable(StoreBusyError):
    """A write transaction the server ended: `kind` "conflict" (deadlock, serialization failure) or
    "lock" (a lock not granted within lock_timeout). Its message is StoreBusyError's one line."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


_state = threading.local()  # per thread: inside a retried call, and whether this try waits briefly first


def first_try() -> bool:
    """Whether the write now starting is a retried call's first try (which waits NOTICE_AFTER_S for a lock)."""
    return getattr(_state, "first", False)


def retried(method):
    """Wrap a Store method whose call is one write transaction, so that on a server it is tried again
    when another writer was in the way (where its backend retries_writes; bounded: CONFLICT_TRIES, the busy timeout plus write_retry_s)."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        if not self._db.retries_writes or getattr(_state, "inside", False):
            return method(self, *args, **kwargs)
        deadline = time.monotonic() + self.busy_timeout_s + self.write_retry_s
        conflicts, said, pause = 0, False, 0.02
        _state.inside = True
        try:
            while True:
                _state.first = not said
                try:
                    return method(self, *args, **kwargs)
                except Retryable as exc:
                    if exc.kind == "lock" and not said:
                        said = True
                        self._say_lock_wait()
                        continue  # now wait as long as the store waits
                    if exc.kind == "lock" and time.monotonic() >= deadline:
                        raise
                    if exc.kind == "conflict":
                        conflicts += 1
                        if conflicts >= CONFLICT_TRIES:
                            raise
                # Apart at random, so two writers that collided do not collide again in step.
                time.sleep(pause * random.uniform(0.5, 1.5))
                pause = min(pause * 2, 1.0)
        finally:
            _state.inside = False
            _state.first = False

    return call
