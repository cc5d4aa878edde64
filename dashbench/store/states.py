"""A run's statuses and the moves between them: the one table every status write in the store obeys.

No TensorFlow here, and no SQL: the store asks `allowed` (or `sources`, for a guarded UPDATE).
"""

from __future__ import annotations

# The values the runs.status column may hold.
# oom: ran out of memory; not_reached: a to-accuracy run whose target most of its seeds missed (it
# finished, with a result, but is never a plain "done").
TERMINAL = ("done", "not_reached", "failed", "oom", "cancelled", "interrupted")
# A final status that a later report may still correct: an "interrupted" run was only presumed dead.
FINAL = ("done", "not_reached", "failed", "oom", "cancelled")
# Ended with a result (the measured figures are there).
WITH_RESULT = ("done", "not_reached")
# Not yet ended: waiting for its device, or going.
ACTIVE = ("queued", "running")
STATUSES = ACTIVE + TERMINAL

# old status -> the statuses it may become. None: a run that has no row yet.
MOVES: dict[str | None, tuple[str, ...]] = {
    None: ("queued", "running"),  # queued by the job queue, or running when started by hand
    "queued": ("running", "failed", "oom", "cancelled", "interrupted"),
    # running -> running: the job queue marks a run running with the child's pid before the child
    # starts; the child then takes its own row over.
    "running": ("running", "done", "not_reached", "failed", "oom", "cancelled", "interrupted"),
    # A run presumed dead may still report its end (or be presumed dead again).
    "interrupted": ("done", "not_reached", "failed", "oom", "cancelled", "interrupted"),
    "done": (),
    "not_reached": (),
    "failed": (),
    "oom": (),
    "cancelled": (),
}
# A run copied in from another store's bundle arrives ended: it never runs here.
IMPORTED = TERMINAL


def allowed(old: str | None, new: str) -> bool:
    """Whether a run whose status is `old` (None: no row yet) may be written as `new`."""
    return new in MOVES.get(old, ())


def sources(new: str) -> tuple[str, ...]:
    """The existing statuses from which a run may become `new`."""
    return tuple(old for old, targets in MOVES.items() if old is not None and new in targets)
