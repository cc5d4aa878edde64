"""The run process's signals: a cancel (SIGTERM, SIGINT, SIGHUP) or the guard's out-of-memory stop
raised in the main thread as RunCancelled or OutOfHostMemory, never in the middle of a store write."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

# The signal the guard sends the main thread to stop a run that is out of memory.
OOM_SIGNAL = signal.SIGUSR1


# Both signal-raised ends derive from BaseException, as KeyboardInterrupt does: raised at whatever
# bytecode the main thread is on, they must pass every `except Exception` on the way out — a
# library's "best effort" block would swallow them (the run then ends `done`), and Keras and TF's
# autograph re-create an Exception with their context added, as another type (a cancel turned into
# ValueError, the run `failed`).
class RunCancelled(BaseException):
    """The run was stopped by SIGTERM, SIGINT or SIGHUP; it is recorded as `cancelled`."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"cancelled by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class OutOfHostMemory(BaseException):
    """The guard stopped the run before the host ran out of memory; it is recorded as `oom`
    with this message: `out of host memory (N GB of M)`."""


_signal_state = threading.local()


@contextlib.contextmanager
def deferred_signals(swallow: bool = False):
    """A cancel that arrives mid-write raises after the write, so no transaction is cut in half.
    With `swallow`, the run is already ending, so a late signal is simply dropped."""
    _signal_state.busy = getattr(_signal_state, "busy", 0) + 1
    try:
        yield
    finally:
        _signal_state.busy -= 1
        pending = getattr(_signal_state, "pending", None)
        if pending is not None and not _signal_state.busy:
            _signal_state.pending = None
            if not swallow:
                _raising(pending)
                raise pending


# The main thread's stop, for the guard to ask again: a stop raised inside a gc callback (JAX's
# _xla_gc_callback runs on every collection), a __del__ or a weakref callback is only printed as
# "Exception ignored in …" and the run goes on to `done`. Reset per run by cancel_on_signals.
raised_stop: dict = {"raised_at": None, "signum": None, "ending": False}
# How long a raised stop may take to reach execute before the guard raises it again.
ASK_AGAIN_S = 0.25


def _raising(exc: BaseException) -> None:
    raised_stop["raised_at"] = time.monotonic()
    raised_stop["signum"] = OOM_SIGNAL if isinstance(exc, OutOfHostMemory) else exc.signum


def raise_lost_stop() -> None:
    """A stop raised in the main thread that never reached the run's end (lost where exceptions are only
    printed, and the guard's asks again came too late for a short run): raised here, before the run's
    end is written, so that the run ends as it was asked to and never as `done`."""
    signum = raised_stop["signum"]
    if raised_stop["raised_at"] is None or raised_stop["ending"] or signum is None:
        return
    if signum == OOM_SIGNAL:
        exc = OutOfHostMemory(oom_message[-1] if oom_message else "out of host memory")
    else:
        exc = RunCancelled(signum)
    _raising(exc)
    raise exc


def stop_behind(exc: BaseException) -> BaseException | None:
    """The run's own stop (a cancel, or the guard's out-of-memory stop) behind `exc`, which a library
    may have turned into an error of its own: `exc` itself, a stop in its chain (a wrapper that catches
    everything and raises its own type), or the stop raised in this run when the chain was lost (a
    framework's native code that turned it into its own error). None: an error of the run's own."""
    seen, hops = exc, 0
    while seen is not None and hops < 64:
        if isinstance(seen, (RunCancelled, OutOfHostMemory)):
            return seen
        seen, hops = seen.__cause__ or seen.__context__, hops + 1
    signum = raised_stop["signum"]
    if raised_stop["raised_at"] is None or signum is None:
        return None
    if signum == OOM_SIGNAL:
        return OutOfHostMemory(oom_message[-1] if oom_message else "out of host memory")
    return RunCancelled(signum)


def mark_ending() -> None:
    """The run reached its end (written or being written): a stop asked again is dropped."""
    if threading.current_thread() is threading.main_thread():
        raised_stop["ending"] = True


def _stop_under_way() -> bool:
    """Whether the code a signal interrupts is already handling a stop (an except or finally block on
    its way out): raising again there would cut the end's own writes short."""
    exc = sys.exc_info()[1]
    while exc is not None:
        if isinstance(exc, (RunCancelled, OutOfHostMemory)):
            return True
        exc = exc.__context__
    return False


# What the guard found when it sent OOM_SIGNAL (the handler raises it in the main thread).
oom_message: list[str] = []


def on_signal(signum, _frame):
    if raised_stop["ending"] or _stop_under_way():
        return
    if signum == OOM_SIGNAL:
        exc = OutOfHostMemory(oom_message[-1] if oom_message else "out of host memory")
    else:
        exc = RunCancelled(signum)
    if getattr(_signal_state, "busy", 0):
        _signal_state.pending = exc
        return
    _raising(exc)
    raise exc


CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def cancel_on_signals():
    """Cancel signals raise RunCancelled in the main thread; they are also written to a wakeup pipe
    (the guard's, yielded: its read end, or None) that a stuck main thread cannot hold up."""
    # Signal handlers can only be set from the main thread; elsewhere (a test thread) we go without.
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    # SIGHUP too: a run in a terminal that goes away (a dropped SSH session) ends `cancelled`.
    raised_stop.update(raised_at=None, signum=None, ending=False)
    previous = {sig: signal.signal(sig, on_signal) for sig in (*CANCEL_SIGNALS, OOM_SIGNAL)}
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    try:
        yield read_fd
    finally:
        signal.set_wakeup_fd(previous_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(read_fd)
        os.close(write_fd)
