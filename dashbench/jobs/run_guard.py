"""The run process's guard. While a run goes, a thread of its own (_Guard) watches two things the
main thread may be too busy to see (a compile or a huge allocation in C code runs no Python signal handler):
- memory: the process's resident memory against DASHBENCH_MEMORY_LIMIT_GB (if set), and the host's
  MemAvailable against DASHBENCH_MEMORY_MIN_FREE (a share of MemTotal, default 0.05) while this
  process holds at least half of the memory in use. Past either, the run is asked to stop (SIGUSR1 to
  the main thread: it ends `oom: out of host memory (N GB of M)`; asked again while a stop raised
  there has not reached the run's end, as one raised inside a gc callback is lost); if it has not ended
  DASHBENCH_MEMORY_GRACE_S (default 2) later, the guard records that itself and ends the process —
  before the kernel's OOM killer has to.
- cancels: a SIGTERM/SIGINT/SIGHUP reaches the guard through signal.set_wakeup_fd even while the main
  thread is stuck; if the run has not ended DASHBENCH_CANCEL_GRACE_S (default 10) later, the guard
  records `cancelled` and ends the process (exit 128 + the signal), with no page rerun or other
  process needed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from typing import Callable

from dashbench.engine import frameworks
from dashbench.hardware import host
from dashbench.jobs import children, multihost, oom, temp_folder
from dashbench.jobs.run_signals import (
    ASK_AGAIN_S,
    CANCEL_SIGNALS,
    OOM_SIGNAL,
    mark_ending,
    on_signal,
    oom_message,
    raised_stop,
)
from dashbench.store import Store
from dashbench.store.queue import heartbeat_lapse_s

# The guard thread's sampling period, and its defaults (each overridable by the environment variable
# named beside it).
GUARD_POLL_S = 0.5
CANCEL_POLL_S = 2.0  # how often the guard asks the store whether a cancel was asked
HEARTBEAT_EVERY_S = 60.0  # the guard's heartbeat for the run: this often, or a third of the lapse if less
BEAT_AGAIN_S = 5.0  # after a heartbeat the store did not take
MEMORY_MIN_FREE = 0.05  # DASHBENCH_MEMORY_MIN_FREE: share of MemTotal that must stay available
MEMORY_GRACE_S = 2.0  # DASHBENCH_MEMORY_GRACE_S: from asking the run to stop to ending it
CANCEL_GRACE_S = 10.0  # DASHBENCH_CANCEL_GRACE_S: from a cancel signal to ending the process
# Called as hook(status, error, run_id) just before the guard ends the process itself, so a command
# can still say how the run ended (`run --json` prints its one JSON object). Registered per run.
HARD_EXIT_HOOKS: list[Callable[[str, str, "str | None"], None]] = []
# How an `error: run …:` line names each end.
END_WORDS = {"failed": "failed", oom.STATUS: "out of memory", "cancelled": "cancelled"}


def beat_every_s() -> float:
    """How often the guard beats for its run: every HEARTBEAT_EVERY_S, or a third of the lapse if less."""
    return min(HEARTBEAT_EVERY_S, heartbeat_lapse_s() / 3)


class _Guard(threading.Thread):
    """Watches the run's memory and its cancel signals from a thread of its own (see the module's
    docstring); ends the process itself when the main thread does not end the run in time."""

    def __init__(
        self,
        wake_fd: int | None,
        end_hard: Callable[[str, str, int], None],
        cancel_asked: Callable[[], bool] | None = None,
        beat: Callable[[], bool] | None = None,
    ):
        super().__init__(name="dashbench-run-guard", daemon=True)
        self.wake_fd, self.end_hard, self.cancel_asked = wake_fd, end_hard, cancel_asked
        self.next_ask = 0.0
        self.beat, self.next_beat = beat, 0.0
        self.stopped = threading.Event()
        limit = host.env_float("DASHBENCH_MEMORY_LIMIT_GB", 0.0)
        self.limit = limit * host.GB if limit > 0 else None
        self.min_free = host.env_float("DASHBENCH_MEMORY_MIN_FREE", MEMORY_MIN_FREE)
        self.memory_grace = host.env_float("DASHBENCH_MEMORY_GRACE_S", MEMORY_GRACE_S)
        self.cancel_grace = host.env_float("DASHBENCH_CANCEL_GRACE_S", CANCEL_GRACE_S)
        self.main_ident = threading.main_thread().ident
        self.oom: tuple[float, str] | None = None  # (deadline, message)
        self.cancel: tuple[float, int] | None = None  # (deadline, signal)

    def stop(self) -> None:
        self.stopped.set()

    def run(self) -> None:
        while not self.stopped.is_set():
            self._read_signals()
            self._check_memory()
            self._ask_again()
            self._ask_store()
            self._beat()
            now = time.monotonic()
            if self.stopped.is_set():
                return
            if self.oom is not None and now >= self.oom[0]:
                self.end_hard(oom.STATUS, self.oom[1], oom.EXIT_CODE)
                return
            if self.cancel is not None and now >= self.cancel[0]:
                signum = self.cancel[1]
                name = signal.Signals(signum).name
                self.end_hard(
                    "cancelled",
                    f"cancelled by {name} (the run did not stop within {self.cancel_grace:g} s; its process was ended)",
                    128 + signum,
                )
                return

    def _read_signals(self) -> None:
        if self.wake_fd is None:
            self.stopped.wait(GUARD_POLL_S)
            return
        poll = ASK_AGAIN_S if raised_stop["raised_at"] is not None else GUARD_POLL_S
        try:
            ready, _, _ = select.select([self.wake_fd], [], [], poll)
            data = os.read(self.wake_fd, 512) if ready else b""
        except (OSError, ValueError):  # closed as the run ends
            self.stopped.wait(GUARD_POLL_S)
            return
        for signum in data:
            if signum in CANCEL_SIGNALS and self.cancel is None:
                self.cancel = (time.monotonic() + self.cancel_grace, signum)

    def _ask_again(self) -> None:
        """A stop raised in the main thread that has not reached execute ASK_AGAIN_S later may have
        been lost (see raised_stop): raise it again, while our handler is still the signal's."""
        raised, signum = raised_stop["raised_at"], raised_stop["signum"]
        if self.wake_fd is None or raised is None or raised_stop["ending"] or time.monotonic() - raised < ASK_AGAIN_S:
            return
        if (self.oom is None and self.cancel is None) or signal.getsignal(signum) is not on_signal:
            return
        raised_stop["raised_at"] = None  # set again by the handler when it raises
        if not self.stopped.is_set():
            try:
                signal.pthread_kill(self.main_ident, signum)
            except (OSError, ValueError):
                pass

    def _ask_store(self) -> None:
        """A cancel asked in the store arms the same timer as the signal: the signal may never come
        through (an engine that set SIGTERM to SIG_IGN, a handler replaced by a library)."""
        now = time.monotonic()
        if self.cancel is not None or self.cancel_asked is None or now < self.next_ask:
            return
        self.next_ask = now + CANCEL_POLL_S
        try:
            asked = self.cancel_asked()
        except Exception:  # a locked or vanished database: the signal path still stands
            return
        if asked:
            self.cancel = (time.monotonic() + self.cancel_grace, signal.SIGTERM)

    def _beat(self) -> None:
        """The run's heartbeat while its main thread writes nothing (a long compile, a slow first step), so
        that no host presumes it dead and gives its claim up (DASHBENCH_HEARTBEAT_LAPSE_S)."""
        now = time.monotonic()
        if self.beat is None or now < self.next_beat:
            return
        try:
            if self.beat():
                self.next_beat = now + beat_every_s()
        except Exception:  # a locked or unreachable database: tried again a few polls on
            self.next_beat = now + BEAT_AGAIN_S

    def _check_memory(self) -> None:
        if self.oom is not None:
            return
        rss = host.process_rss()
        available, total = host.host_memory()
        message = None
        if self.limit is not None and rss is not None and rss > self.limit:
            message = (
                f"out of host memory ({host.gb(rss)} of {host.gb(self.limit)} allowed by DASHBENCH_MEMORY_LIMIT_GB)"
            )
        elif (
            available is not None
            and rss is not None
            and available < self.min_free * total
            and rss >= 0.5 * (total - available)
        ):  # this run, not another process, is what fills it
            message = f"out of host memory ({host.gb(rss)} of {host.gb(total)}; {host.gb(available)} left)"
        if message is None:
            return
        self.oom = (time.monotonic() + self.memory_grace, message)
        oom_message.append(message)
        if self.wake_fd is not None:  # the handlers are ours: ask the main thread to stop the run
            try:
                signal.pthread_kill(self.main_ident, OOM_SIGNAL)
            except (OSError, ValueError):
                pass


@contextlib.contextmanager
def guarded(store: Store | None, wake_fd: int | None):
    """The run's guard thread, from before the device wait to after the run's end is written.
    Yields the run's shared state: its run_id once begun, and the lock its end is written under."""
    state = {"run_id": None, "begun": False, "ended": False, "ending": threading.Lock()}
    path = store.path if store is not None else None

    def end_hard(status: str, error: str, code: int) -> None:
        with state["ending"]:
            if state["ended"]:
                return  # the main thread got there first
            state["ended"] = True
            if path is not None and state["begun"] and state["run_id"]:
                try:
                    with Store(path) as own:  # this thread's own connection
                        if status == "cancelled" and multihost.role() is not None:  # as execute's cancel
                            from dashbench.store.placement import end_group_run

                            end_group_run(own, state["run_id"], status, error, only_from=("queued", "running"))
                        else:
                            own.finish_run(state["run_id"], status, error=error)
                except Exception as exc:  # the end is still the end; say why it is not recorded
                    say(f"error: could not record the run's end: {exc}")
            say_past_silencing(f"error: run {END_WORDS.get(status, status)}: {error}")
            for hook in list(HARD_EXIT_HOOKS):
                try:
                    hook(status, error, state["run_id"] if state["begun"] else None)
                except Exception:
                    pass
            temp_folder.remove_now()  # no finally block or atexit hook runs past os._exit
            children.end_now()
            os._exit(code)

    watcher: list[Store] = []  # the guard thread's own handle, opened on its first question

    def cancel_asked() -> bool:
        if path is None or not state["begun"] or not state["run_id"]:
            return False
        if not watcher:
            watcher.append(Store(path, read_only=True))
        return watcher[0].cancel_asked(state["run_id"])

    beater: list[Store] = []  # the guard thread's own writing handle, for the heartbeat

    def beat() -> bool:
        if path is None or not state["begun"] or not state["run_id"] or state["ended"]:
            return False
        if not beater:
            beater.append(Store(path))
        beater[0].heartbeat(state["run_id"])
        return True

    guard = _Guard(wake_fd, end_hard, cancel_asked, beat)
    guard.start()
    try:
        yield state
    finally:
        mark_ending()
        guard.stop()
        guard.join(timeout=2 * GUARD_POLL_S + 1)
        for own in watcher + beater:
            own.close()


def say_past_silencing(line: str) -> None:
    """From the guard thread: the main thread may be in a compile whose native output is silenced
    (descriptor 2 sent to a scratch file), and this line is the user's only word of the run's end."""
    try:
        sys.stderr.flush()
        os.write(frameworks.user_stderr_fd(), (line + "\n").encode())
    except (OSError, ValueError):
        pass


def say(line: str) -> None:
    try:  # one write, the newline in it: a thread's note flushed between line and newline would join them
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
