"""A run's own temporary folder, removed when the run ends, however it ends.

TensorFlow's autograph writes the source of every function it converts to tempfile's default folder
(`__autograph_generated_file*.py`) and removes those files only in an atexit hook. A run process that
the guard ends with os._exit (jobs/run_guard.py: a stuck cancel, a run out of host memory) runs no atexit
hook, so each such run left its files in the user's /tmp. While a run goes, tempfile's default folder
(`tempfile.tempdir`, read by every NamedTemporaryFile/mkstemp call) and TMPDIR (for the processes and
native code it starts) point at a folder of the run's own, removed at its end: on the way out of
execute, and by `remove_now` just before an os._exit.

A process killed with SIGKILL cleans nothing: its launcher (jobs/queue.py), which knows its pid and the
temporary folder it gave it, removes the folder (named for the pid) once it has reaped the process.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import tempfile
import threading

PREFIX = "dashbench-run-"
# The folders of the runs going in this process (one, except for a run started inside a run).
_held: list[str] = []
_lock = threading.Lock()


@contextlib.contextmanager
def own_folder():
    """tempfile's default folder and TMPDIR point at a fresh folder while the block runs, removed after
    it. Yields the folder, or None when none can be made (the default stays: a run never fails for it)."""
    try:
        path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    except OSError:  # no writable temporary folder: TensorFlow will say so itself if it needs one
        yield None
        return
    saved_tempdir, saved_env = tempfile.tempdir, os.environ.get("TMPDIR")
    with _lock:
        _held.append(path)
    tempfile.tempdir = path
    os.environ["TMPDIR"] = path
    try:
        yield path
    finally:
        tempfile.tempdir = saved_tempdir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        with _lock:
            _held.remove(path)
        shutil.rmtree(path, ignore_errors=True)


def in_own_folder(function):
    """`function` (a run's whole life) runs inside own_folder."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with own_folder():
            return function(*args, **kwargs)

    return wrapper


def remove_now() -> None:
    """Remove the folders of the runs going in this process now: for a process about to end with
    os._exit, which runs no finally block and no atexit hook."""
    with _lock:
        held = list(_held)
    for path in held:
        shutil.rmtree(path, ignore_errors=True)


def remove_left_by(pid: int, where: str | None) -> None:
    """Remove the folders a run process `pid` made in `where` (the temporary folder it was given): for
    its launcher, once it has reaped the process (a SIGKILL leaves them; the pid is not reused before)."""
    if not where:
        return
    try:
        names = [name for name in os.listdir(where) if name.startswith(f"{PREFIX}{pid}-")]
    except OSError:
        return
    for name in names:
        shutil.rmtree(os.path.join(where, name), ignore_errors=True)  # a symlink is refused, not followed
