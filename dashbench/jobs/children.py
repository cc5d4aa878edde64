"""The processes a run starts end with the run. Its process becomes a child subreaper (Linux's
PR_SET_CHILD_SUBREAPER), so that whatever a user's builder forks stays its descendant even once
orphaned (a double fork, a daemon), and at the run's end every descendant that was not there at its
start is killed: a child left alive would hold the run's pipes open, and whoever reads them would
wait for ever. The queue starts each run in a session and process group of its own (jobs/queue.py);
this covers a run started by hand, whose group may be its shell's."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
ROUNDS = 5  # a child may fork while its siblings are killed: look again, this many times at most


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) of every process /proc shows."""
    out = {}
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as handle:
                text = handle.read()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 19:
            out[int(name)] = (int(fields[1]), fields[19])
    return out


def descendants(root: int | None = None) -> set[tuple[int, str]]:
    """(pid, start time) of every descendant of `root` (this process by default)."""
    table = _table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _start) in table.items():
        children.setdefault(parent, []).append(pid)
    found, pending = set(), [root or os.getpid()]
    while pending:
        for pid in children.get(pending.pop(), []):
            found.add((pid, table[pid][1]))
            pending.append(pid)
    return found


def become_subreaper(on: bool = True) -> bool:
    """Set this process's subreaper flag; returns what it was (False where it cannot be read)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        was = ctypes.c_int(0)
        libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0)
        libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
        return bool(was.value)
    except (OSError, AttributeError):  # not Linux: a double-forked child escapes, a plain one does not
        return False


def end_new(before: set[tuple[int, str]]) -> list[int]:
    """Kill the descendants not in `before`; returns their pids (their zombies reaped where ours)."""
    ended: list[int] = []
    for _round in range(ROUNDS):
        new = [pid for pid, start in descendants() - before]
        if not new:
            break
        killed = []
        for pid in new:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        ended += killed
        for pid in killed:
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)  # an orphan reparented to us, or our own child: its zombie goes
    return ended


# What was there when the running run began (set while one runs), for an end by os._exit.
_running: list[set[tuple[int, str]]] = []


@contextlib.contextmanager
def ending_with_run():
    """The block is a run: every process started in it is ended with it. The process is a subreaper only
    for the block: one that stays so after a run (a test worker, a notebook) would collect the orphans of
    every later child as zombies that nobody reaps."""
    was = become_subreaper()
    before = descendants()
    _running.append(before)
    try:
        yield
    finally:
        _running.remove(before)
        end_new(before)
        if not was:
            become_subreaper(False)


def end_now() -> None:
    """Before an os._exit (the guard's, a stuck builder's): the running run's children end first."""
    for before in list(_running):
        end_new(before)
