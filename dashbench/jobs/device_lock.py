"""One measuring process per device kind on this host: an OS file lock per kind.

Every run takes it before the engine touches the device (the run command, sweep points and the
dashboard's runs are all run processes going through runner.execute), whatever database it
records to. The kernel drops a flock when its holder dies, SIGKILL included, so no stale lock
outlives a run. The lock files live in one folder per user, not per database: `$DASHBENCH_LOCK_DIR`
when set (a folder every user can write, to exclude other users' runs too), else `/tmp/dashbench-UID`
(fixed, so runs started with different environments still meet). The holder writes who it is into
the file, so a waiting or refused run can name it. `auto` may become any kind, so it takes every
kind's lock, always in one order (no deadlock). No TensorFlow here.

A run that measures beside the holder (--share-device) disturbs the holder's window as much as the holder
disturbs its own, so both are flagged device_shared. The sharer leaves a mark for the holder it found
(`KIND.shared-with.TOKEN`, the holder's token from the lock file) and, while it measures, holds a lock on
a file of its own (`KIND.sharing.…`), so that a run taking the lock while it still measures knows too.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import stat
import sys
import time
import uuid
from pathlib import Path
from typing import Callable, Iterator

KINDS = ("cpu", "gpu", "tpu")
WAIT, NO_WAIT, SHARE = "wait", "no_wait", "share"
MODES = (WAIT, NO_WAIT, SHARE)
POLL_S = 0.1


class DeviceBusy(Exception):
    """The device is held by another run and this one was told not to wait."""

    def __init__(self, kind: str, holder: str):
        self.kind, self.holder = kind, holder
        super().__init__(
            f"the {kind} device is in use by {holder}; wait for it (leave out --no-wait) "
            "or measure beside it with --share-device (the result is flagged device_shared)"
        )


def kinds_for(device: str) -> tuple[str, ...]:
    return KINDS if device == "auto" else (device,)


def lock_dir() -> Path:
    given = os.environ.get("DASHBENCH_LOCK_DIR")
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        return path
    path = Path("/tmp") / f"dashbench-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    info = os.lstat(path)
    # A folder in /tmp that someone else made (or a link) could be swapped under us.
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise OSError(f"{path} is not a private folder of this user; set DASHBENCH_LOCK_DIR to one")
    return path


def peer_worker_holds_it(environ=None) -> bool:
    """Whether this process is a later worker of a multi-worker run (TF_CONFIG) whose lower-index
    worker runs on this same host: that worker holds the lock for the run, and waiting for it here
    would deadlock the cluster, whose workers must all start before any of them can step.
    On JAX (JAX_COORDINATOR_ADDRESS), a process other than 0 whose coordinator — process 0 — runs on
    this host leaves the lock to it."""
    environ = os.environ if environ is None else environ
    coordinator = environ.get("JAX_COORDINATOR_ADDRESS")
    if coordinator:
        try:
            process = int(environ.get("JAX_PROCESS_ID", "0"))
        except ValueError:
            return False  # the engine reports the bad value
        return process > 0 and _host_of(coordinator) == "localhost"
    raw = environ.get("TF_CONFIG")
    if not raw:
        return False
    try:
        config = json.loads(raw)
        workers = list(config["cluster"]["worker"])
        index = int(config["task"]["index"]) if config["task"].get("type", "worker") == "worker" else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return False  # the engine reports a bad TF_CONFIG; the lock is taken as for any run
    if index is None or not 0 < index < len(workers):
        return False
    here = _host_of(workers[index])
    return any(_host_of(address) == here for address in workers[:index])


def _host_of(address: str) -> str:
    host = str(address).rsplit(":", 1)[0].strip("[]").lower()
    return (
        "localhost"
        if host in ("localhost", "127.0.0.1", "::1", socket.gethostname().lower()) or host in _own_addresses()
        else host
    )


def _own_addresses() -> set[str]:
    """This machine's IP addresses: a coordinator named by one (a cluster's node IP) is on this host."""
    import psutil

    try:
        return {
            a.address.split("%")[0].lower()
            for addrs in psutil.net_if_addrs().values()
            for a in addrs
            if a.family in (socket.AF_INET, socket.AF_INET6)
        }
    except OSError:
        return set()


def holder_text(info: dict | None) -> str:
    """Who holds a lock, in a few words, from what the holder wrote into the file."""
    if not info or not info.get("pid"):
        return "another process"
    text = f"pid {info['pid']}"
    if info.get("run_id"):
        text += f", run {info['run_id']}"
    if info.get("command"):
        command = info["command"]
        text += f" ({command[:117] + '...' if len(command) > 120 else command})"
    return text


def read_holder(kind: str) -> dict | None:
    try:
        text = (lock_dir() / f"{kind}.lock").read_text()
        return json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None  # half written, or gone: the name is a courtesy, the lock is the truth


class _Held:
    def __init__(self, kind: str, fd: int):
        self.kind, self.fd = kind, fd


class Holding:
    """What `hold` yields: whether the device is shared, and a way to name the run once it has an id."""

    def __init__(self, info: dict, held: list[_Held]):
        self.info, self._held = info, held
        self.beside = False  # this run measures beside a holder (SHARE)
        self.shared_at_start = False  # a sharer was measuring when this run took the lock

    @property
    def shared(self) -> bool:
        """Whether another run measured on the device while this one held it or measured beside it: read
        at the run's end, when the marks of every sharer that came meanwhile are there."""
        if self.beside or self.shared_at_start:
            return True
        return any(_marked(item.kind, self.info["token"]) or _sharing(item.kind) for item in self._held)

    def name_run(self, run_id: str | None) -> None:
        self.info["run_id"] = run_id
        for item in self._held:
            _write_holder(item.fd, self.info)


def _open(kind: str) -> int:
    fd = os.open(lock_dir() / f"{kind}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    if os.environ.get("DASHBENCH_LOCK_DIR") and os.fstat(fd).st_uid == os.getuid():
        # A folder shared by several users: the umask must not keep the others out of our lock file.
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)
    return fd


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _write_holder(fd: int, info: dict) -> None:
    data = json.dumps(info).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _release(held: list[_Held]) -> None:
    for item in reversed(held):
        with contextlib.suppress(OSError):
            os.ftruncate(item.fd, 0)  # no stale name for the next one to read
        os.close(item.fd)  # closing the only descriptor drops the flock


def _marked(kind: str, token: str) -> bool:
    return (lock_dir() / f"{kind}.shared-with.{token}").exists()


def _sharing(kind: str) -> bool:
    """Whether a run measures beside the lock's holder now: a sharer's file that it still holds locked
    (one whose sharer died is unlocked: removed)."""
    active = False
    for path in lock_dir().glob(f"{kind}.sharing.*"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # gone meanwhile
        try:
            if _try_lock(fd):
                with contextlib.suppress(OSError):
                    path.unlink()
            else:
                active = True
        finally:
            os.close(fd)
    return active


def _start_sharing(kind: str, token: str) -> tuple[int, Path]:
    """Say that this run measures beside the holder of `kind`'s lock: a file held locked until it ends
    (locked before it takes its name, so no one finds it unlocked), then a mark for the holder found."""
    folder = lock_dir()
    new = folder / f"{kind}.starting.{token}"
    fd = os.open(new, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    path = folder / f"{kind}.sharing.{token}"
    os.rename(new, path)
    for _ in range(10):  # the holder writes its name just after locking (as _busy_holder waits)
        holder = read_holder(kind)
        if holder and holder.get("token"):
            with contextlib.suppress(OSError):
                (folder / f"{kind}.shared-with.{holder['token']}").touch()
            break
        time.sleep(0.02)
    return fd, path


def _forget_marks(kind: str, keep: str | None = None) -> None:
    """Remove the marks left for holders of `kind` (all but `keep`'s): none of them holds it any more."""
    for path in lock_dir().glob(f"{kind}.shared-with.*"):
        if keep is None or not path.name.endswith("." + keep):
            with contextlib.suppress(OSError):
                path.unlink()


def _busy_holder(kind: str) -> str:
    # The new holder writes its name just after locking: give it a moment before saying "another process".
    for _ in range(10):
        info = read_holder(kind)
        if info:
            return holder_text(info)
        time.sleep(0.02)
    return holder_text(None)


@contextlib.contextmanager
def hold(
    device: str,
    mode: str = WAIT,
    run_id: str | None = None,
    on_wait: Callable[[str, str], None] | None = None,
    before_wait: Callable[[], None] | None = None,
) -> Iterator[Holding]:
    """Hold the lock of every kind `device` may use while the block runs. Yields a Holding, whose
    `shared` is True when mode is SHARE and another run held the device.

    WAIT polls until free, calling `before_wait()` once and `on_wait(kind, holder)` whenever the
    holder changes; NO_WAIT raises DeviceBusy at once; SHARE goes on without the lock when it is
    held. A signal handler that raises ends the wait (a cancel), and the lock is let go."""
    if mode not in MODES:
        raise ValueError(f"mode: one of {', '.join(MODES)}, not {mode!r}")
    info = {
        "pid": os.getpid(),
        "run_id": run_id,
        "command": " ".join(sys.argv),
        "since": time.time(),
        "token": uuid.uuid4().hex,
    }
    held: list[_Held] = []
    sharing: list[tuple[int, Path]] = []
    holding = Holding(info, held)
    if peer_worker_holds_it():
        yield holding
        return
    waited = False
    try:
        for kind in kinds_for(device):
            fd = _open(kind)
            if _try_lock(fd):
                held.append(_Held(kind, fd))
                _write_holder(fd, info)
                continue
            if mode != WAIT:
                holder = _busy_holder(kind)
                os.close(fd)
                if mode == NO_WAIT:
                    raise DeviceBusy(kind, holder)
                holding.beside = True
                sharing.append(_start_sharing(kind, info["token"]))
                continue
            try:
                if not waited and before_wait is not None:
                    before_wait()
                waited = True
                last = None
                while not _try_lock(fd):
                    holder = _busy_holder(kind)
                    if holder != last and on_wait is not None:
                        on_wait(kind, holder)
                    last = holder
                    time.sleep(POLL_S)
            except BaseException:
                os.close(fd)
                raise
            held.append(_Held(kind, fd))
            _write_holder(fd, info)
        for item in held:
            _forget_marks(item.kind, keep=info["token"])
        holding.shared_at_start = any(_sharing(item.kind) for item in held)
        yield holding
    finally:
        for fd, path in sharing:
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)
        for item in held:
            _forget_marks(item.kind)
        _release(held)
