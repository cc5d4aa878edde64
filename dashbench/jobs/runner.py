"""Run the engine inside this process and record the run's whole life in the store.

The row exists before the first step (so a crash leaves a trace, never nothing), samples land while
the run goes (so a SIGKILL keeps what was measured), and the end is always written: `done` with the
result, `failed` with the error text, or `cancelled` on SIGTERM/SIGINT.

While the run goes, a guard thread in this process (_Guard) watches two things the main thread may be
too busy to see (a compile or a huge allocation in C code runs no Python signal handler):
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
import json
import os
import select
import signal
import sys
import threading
import time
from typing import Callable

from dashbench import memory
from dashbench.accuracy import final_status
from dashbench.engine import frameworks, peak_memory
from dashbench.jobs import device_lock, multihost, oom, store_buffer, temp_folder
from dashbench.result import RunResult
from dashbench.spec import SPEC_DEFAULTS, RunSpec, SpecError
from dashbench.stats import FLAG_DEVICE_SHARED
from dashbench.store import Store, StoreError, new_run_id, this_host
from dashbench.store.queue import heartbeat_lapse_s

# Samples are committed at least this often; between commits they wait in memory.
FLUSH_EVERY_S = 0.2
FLUSH_EVERY_N = 100
# A run's writes wait this long (after SQLite's busy timeout, with backoff) for a write lock that
# another process holds, rather than fail a run whose samples are in memory.
WRITE_RETRY_S = 600.0
# The guard thread's sampling period, and its defaults (each overridable by the environment variable
# named beside it).
GUARD_POLL_S = 0.5
CANCEL_POLL_S = 2.0  # how often the guard asks the store whether a cancel was asked
HEARTBEAT_EVERY_S = 60.0  # the guard's heartbeat for the run: this often, or a third of the lapse if less
BEAT_AGAIN_S = 5.0  # after a heartbeat the store did not take
MEMORY_MIN_FREE = 0.05  # DASHBENCH_MEMORY_MIN_FREE: share of MemTotal that must stay available
MEMORY_GRACE_S = 2.0  # DASHBENCH_MEMORY_GRACE_S: from asking the run to stop to ending it
CANCEL_GRACE_S = 10.0  # DASHBENCH_CANCEL_GRACE_S: from a cancel signal to ending the process
# The signal the guard sends the main thread to stop a run that is out of memory.
OOM_SIGNAL = signal.SIGUSR1
# Called as hook(status, error, run_id) just before the guard ends the process itself, so a command
# can still say how the run ended (`run --json` prints its one JSON object). Registered per run.
HARD_EXIT_HOOKS: list[Callable[[str, str, "str | None"], None]] = []
# How an `error: run …:` line names each end.
END_WORDS = {"failed": "failed", oom.STATUS: "out of memory", "cancelled": "cancelled"}


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


def beat_every_s() -> float:
    """How often the guard beats for its run: every HEARTBEAT_EVERY_S, or a third of the lapse if less."""
    return min(HEARTBEAT_EVERY_S, heartbeat_lapse_s() / 3)


class _Recorder:
    """Turns engine events into store writes (through the run's RunWrites), batching samples by time."""

    def __init__(self, store: "store_buffer.RunWrites | None", run_id: str | None,
                 on_event: Callable[[dict], None] | None):
        self.store, self.run_id, self.on_event = store, run_id, on_event
        self.pending: list[dict] = []
        self.last_flush = time.monotonic()

    def __call__(self, event: dict) -> None:
        if self.store is not None:
            kind = event.get("event")
            if kind == "sample":
                if len(self.pending) >= FLUSH_EVERY_N:  # a full batch goes when the next sample comes, so
                    self.flush()                        # a run's last batch goes with its end (execute)
                self.pending.append(event)
                if time.monotonic() - self.last_flush >= FLUSH_EVERY_S:
                    self.flush()
            elif kind in ("phase", "evaluation"):
                # A to-accuracy run's evaluation line ("epoch 3 of ≤ 20: validation accuracy 0.874")
                # is its phase: the live panel shows it and draws its bar from it.
                self.flush()
                with _deferred_signals():
                    self.store.set_phase(self.run_id, event.get("phase") if kind == "phase" else event.get("text"))
        if self.on_event is not None:
            self.on_event(event)

    def take(self) -> list[dict]:
        """The samples not written yet, for the caller to write (with the run's end)."""
        pending, self.pending = self.pending, []
        return pending

    def flush(self, wait: bool = False) -> None:
        if self.store is None or not self.pending:
            return
        with _deferred_signals():
            # Not waited for on a server: the run trains on while the batch travels (its answer is read
            # by the run's next write, which raises if it was not stored).
            self.store.add_samples(self.run_id, self.pending, wait=wait)
        self.pending = []
        self.last_flush = time.monotonic()


_signal_state = threading.local()


@contextlib.contextmanager
def _deferred_signals(swallow: bool = False):
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
# "Exception ignored in …" and the run goes on to `done`. Reset per run by _cancel_on_signals.
_stop: dict = {"raised_at": None, "signum": None, "ending": False}
# How long a raised stop may take to reach execute before the guard raises it again.
ASK_AGAIN_S = 0.25


def _raising(exc: BaseException) -> None:
    _stop["raised_at"] = time.monotonic()
    _stop["signum"] = OOM_SIGNAL if isinstance(exc, OutOfHostMemory) else exc.signum


def _mark_ending() -> None:
    """The run reached its end (written or being written): a stop asked again is dropped."""
    if threading.current_thread() is threading.main_thread():
        _stop["ending"] = True


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
_oom_message: list[str] = []


def _on_signal(signum, _frame):
    if _stop["ending"] or _stop_under_way():
        return
    if signum == OOM_SIGNAL:
        exc = OutOfHostMemory(_oom_message[-1] if _oom_message else "out of host memory")
    else:
        exc = RunCancelled(signum)
    if getattr(_signal_state, "busy", 0):
        _signal_state.pending = exc
        return
    _raising(exc)
    raise exc


CANCEL_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def _cancel_on_signals():
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
    _stop.update(raised_at=None, signum=None, ending=False)
    previous = {sig: signal.signal(sig, _on_signal) for sig in (*CANCEL_SIGNALS, OOM_SIGNAL)}
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    try:
        yield read_fd
    finally:
        signal.set_wakeup_fd(previous_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(read_fd)
        os.close(write_fd)


class _Guard(threading.Thread):
    """Watches the run's memory and its cancel signals from a thread of its own (see the module's
    docstring); ends the process itself when the main thread does not end the run in time."""

    def __init__(self, wake_fd: int | None, end_hard: Callable[[str, str, int], None],
                 cancel_asked: Callable[[], bool] | None = None, beat: Callable[[], bool] | None = None):
        super().__init__(name="dashbench-run-guard", daemon=True)
        self.wake_fd, self.end_hard, self.cancel_asked = wake_fd, end_hard, cancel_asked
        self.next_ask = 0.0
        self.beat, self.next_beat = beat, 0.0
        self.stopped = threading.Event()
        limit = memory.env_float("DASHBENCH_MEMORY_LIMIT_GB", 0.0)
        self.limit = limit * memory.GB if limit > 0 else None
        self.min_free = memory.env_float("DASHBENCH_MEMORY_MIN_FREE", MEMORY_MIN_FREE)
        self.memory_grace = memory.env_float("DASHBENCH_MEMORY_GRACE_S", MEMORY_GRACE_S)
        self.cancel_grace = memory.env_float("DASHBENCH_CANCEL_GRACE_S", CANCEL_GRACE_S)
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
                self.end_hard("cancelled", f"cancelled by {name} (the run did not stop within "
                                           f"{self.cancel_grace:g} s; its process was ended)", 128 + signum)
                return

    def _read_signals(self) -> None:
        if self.wake_fd is None:
            self.stopped.wait(GUARD_POLL_S)
            return
        poll = ASK_AGAIN_S if _stop["raised_at"] is not None else GUARD_POLL_S
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
        been lost (see _stop): raise it again, while our handler is still the signal's."""
        raised, signum = _stop["raised_at"], _stop["signum"]
        if self.wake_fd is None or raised is None or _stop["ending"] or time.monotonic() - raised < ASK_AGAIN_S:
            return
        if (self.oom is None and self.cancel is None) or signal.getsignal(signum) is not _on_signal:
            return
        _stop["raised_at"] = None  # set again by the handler when it raises
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
        rss = memory.process_rss()
        available, total = memory.host_memory()
        message = None
        if self.limit is not None and rss is not None and rss > self.limit:
            message = f"out of host memory ({memory.gb(rss)} of {memory.gb(self.limit)} allowed by DASHBENCH_MEMORY_LIMIT_GB)"
        elif available is not None and rss is not None and available < self.min_free * total \
                and rss >= 0.5 * (total - available):  # this run, not another process, is what fills it
            message = f"out of host memory ({memory.gb(rss)} of {memory.gb(total)}; {memory.gb(available)} left)"
        if message is None:
            return
        self.oom = (time.monotonic() + self.memory_grace, message)
        _oom_message.append(message)
        if self.wake_fd is not None:  # the handlers are ours: ask the main thread to stop the run
            try:
                signal.pthread_kill(self.main_ident, OOM_SIGNAL)
            except (OSError, ValueError):
                pass


@temp_folder.in_own_folder  # TensorFlow's autograph files go there, gone at the run's end
def execute(spec: RunSpec | dict | None, db_path=None, run_id: str | None = None, record: bool = True,
            on_event: Callable[[dict], None] | None = None, device_wait: str = device_lock.WAIT) -> RunResult:
    """Run `spec` with `dashbench.engine.loop.run`, recording it. Returns the result with its run_id
    (None when not recorded).

    With `run_id`, an existing queued row (e.g. from the job runner) is started with the spec stored
    in it: pass None, or the spec `stored_spec` read from that row; a different spec is refused. A
    `run_id` with no row makes a new row under that id. Errors are recorded (`failed`, with the
    error text) and then raised again.

    The device's lock (device_lock) is held from before the engine starts to the run's end.
    `device_wait`: WAIT for a held device (phase "waiting for the device …"), NO_WAIT raises
    DeviceBusy before any row is written, SHARE measures beside the holder, flagged device_shared."""
    from dashbench.engine import loop  # looked up per call, so tests can swap loop.run

    store = Store(db_path, write_retry_s=WRITE_RETRY_S) if record else None
    # Every write of the run goes through `writes`, which waits out an outage of the store (store_buffer.py).
    writes = store_buffer.RunWrites(store, beat_every_s()) if store is not None else None
    # A later worker of a multi-host run writes no row of its own: worker 0 writes the run, this
    # process adds its host to it at the end (jobs/multihost.py).
    role = multihost.role()
    if role is not None and store is not None:
        run_id = multihost.agreed_run_id(run_id)
    later_worker = role is not None and not role.writes_run and store is not None
    state_of_run: dict = {}
    try:
        if store is not None:
            # A database this process cannot write is refused before the device, the engine or a row.
            store.check_writable("record the run")
        with _cancel_on_signals() as wake_fd, _guarded(store, wake_fd) as state:
            state_of_run = state
            if store is None and spec is None:
                raise ValueError("spec: a spec is required when the run is not recorded")
            spec, stored = _prepare(store, spec, run_id)
            state.update(run_id=run_id, begun=False)
            recorder = None

            def begin():  # the row shows the run from its wait for the device on
                if later_worker:
                    return
                if store is not None and not state["begun"]:
                    # Its id chosen here, so a create tried again after an outage makes no second row.
                    state["run_id"] = writes.wait_for(_begin, spec, run_id or new_run_id(), stored)
                    writes.begun(state["run_id"], spec.to_dict(), os.getpid())
                    if role is not None and multihost.RUN_ID_ENV not in os.environ:
                        # What a JAX run's later workers take when they were given no id; this run's only.
                        os.environ[multihost.RUN_ID_ENV] = state["run_id"]
                        state["set_run_id_env"] = True
                state["begun"] = True

            def waiting(kind: str, holder: str):
                _Recorder(None if later_worker else writes, state["run_id"], on_event)(
                    {"event": "phase", "phase": f"waiting for the device ({kind}: in use by {holder})"})

            try:
                with device_lock.hold(spec.device, device_wait, run_id, on_wait=waiting,
                                      before_wait=begin) as holding:
                    begin()
                    run_id = state["run_id"]
                    holding.name_run(run_id)
                    tracker = peak_memory.Tracker()
                    tracker.backend = spec.backend
                    recorder = _Recorder(None if later_worker else writes, run_id, tracker.watching(on_event))
                    with _calibrated_cpu_peaks(None if later_worker else store, spec, run_id):
                        result = loop.run(spec, on_event=recorder)
                    # The last samples wait for the run's end and are written with it (one write fewer);
                    # an end by an error below writes them first (_finish).
                    result = result.replace(memory=_memory_record(tracker, spec))
                    if holding.shared:
                        result = result.replace(flags=[*result.flags, FLAG_DEVICE_SHARED])
                    if role is not None and store is not None:
                        entry = multihost.placement_entry(result, role.index, this_host())
                        if later_worker:
                            return _join_run(store, role, entry, result, run_id)
                        result = result.replace(placement=multihost.merged_placement(result.placement, entry, role.count))
            except RunCancelled as exc:
                _mark_ending()
                run_id = state["run_id"]
                if store is not None and state["begun"]:
                    # A multi-host run's process is cancelled by its launcher after a lost host or a
                    # failed worker ended the run: that end, already written, stays (fleet/slices.py).
                    _finish(writes, run_id, "cancelled", None, str(exc), recorder, state, only_if_going=role is not None)
                    _tag(exc, run_id)
                raise
            except BaseException as exc:
                _mark_ending()
                run_id = state["run_id"]
                if store is not None and state["begun"]:
                    status = "cancelled" if isinstance(exc, KeyboardInterrupt) else \
                        oom.STATUS if oom.is_oom(exc) else "failed"
                    error = _error_text(exc)
                    if isinstance(exc, store_buffer.OutageLimit):  # its end and samples go to a local bundle
                        status, error = "interrupted", str(exc)
                    if status == "failed" and role is not None and multihost.peer_lost(error):
                        # Not this host's failure: a peer stopped answering. Presumed, so the launcher
                        # (fleet/slices.py) may still name the lost host or the failed worker.
                        status, error = "interrupted", f"a peer host of this {role.count}-host run stopped answering: {error}"
                    _finish(writes, run_id, status, None, error, recorder, state,
                            only_if_going=status == "interrupted" or (status == "cancelled" and role is not None))
                    _tag(exc, run_id)
                raise
            with _deferred_signals(swallow=True), state["ending"]:
                _mark_ending()
                state["ended"] = True
                result = result.replace(run_id=run_id)
                if store is not None:
                    # not_reached: a to-accuracy run whose target at most half its seeds reached.
                    writes.finish(run_id, final_status(result.accuracy), result=result.to_dict(),
                                  samples=recorder.take())
            return result
    finally:
        if state_of_run.get("set_run_id_env"):
            os.environ.pop(multihost.RUN_ID_ENV, None)
        if store is not None:
            store.close()


@contextlib.contextmanager
def _guarded(store: Store | None, wake_fd: int | None):
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
                    _say(f"error: could not record the run's end: {exc}")
            _say_past_silencing(f"error: run {END_WORDS.get(status, status)}: {error}")
            for hook in list(HARD_EXIT_HOOKS):
                try:
                    hook(status, error, state["run_id"] if state["begun"] else None)
                except Exception:
                    pass
            temp_folder.remove_now()  # no finally block or atexit hook runs past os._exit
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
        _mark_ending()
        guard.stop()
        guard.join(timeout=2 * GUARD_POLL_S + 1)
        for own in watcher + beater:
            own.close()


def _join_run(store: Store, role: "multihost.Role", entry: dict, result: RunResult, run_id: str | None) -> RunResult:
    """A later worker's end: its host and devices added to worker 0's run (which may take the id
    from the engine: JAX hands worker 0's on), nothing else written."""
    from dashbench.store.placement import add_to_placement

    run_id = multihost.agreed_run_id(run_id)
    if run_id is None:
        _say(multihost.missing_id_warning(role))
        return result
    if not add_to_placement(store, run_id, lambda placement: multihost.merged_placement(placement, entry, role.count),
                            wait_s=multihost.join_wait_s()):
        _say(f"warning: worker {role.index} could not add its host to run {run_id}: worker 0 wrote no result")
    return result.replace(run_id=run_id)


def _say_past_silencing(line: str) -> None:
    """From the guard thread: the main thread may be in a compile whose native output is silenced
    (descriptor 2 sent to a scratch file), and this line is the user's only word of the run's end."""
    try:
        sys.stderr.flush()
        os.write(frameworks.user_stderr_fd(), (line + "\n").encode())
    except (OSError, ValueError):
        pass


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


@contextlib.contextmanager
def _calibrated_cpu_peaks(store: Store | None, spec: RunSpec, run_id: str | None = None):
    """A CPU run measures its MFU against the best CPU peak this host's calibrations reached
    (`dashbench doctor`), handed to the engine in its environment, rather than a probe taken under
    the run's own load. No calibration yet: against the host's first probe on this backend, kept in
    the store (the first run's own), so that early runs compare — peak_source "provisional"."""
    from dashbench.engine import calibration, probe

    cpu = store is not None and spec.device in ("cpu", "auto")
    peaks = store.best_cpu_peaks(this_host()) if cpu else {}
    saved = {name: os.environ.get(name) for name in (calibration.CPU_PEAKS_ENV, calibration.CPU_PEAK_SOURCE_ENV)}
    # A peak given by hand (DASHBENCH_CPU_PEAKS, a probe taken on a quiet machine) counts too: the best wins.
    for dtype, value in calibration.cpu_peaks().items():
        peaks[dtype] = max(value, peaks.get(dtype, 0.0))
    first = not peaks and cpu
    if first:
        peaks = store.first_cpu_peaks(this_host(), spec.backend)
        os.environ[calibration.CPU_PEAK_SOURCE_ENV] = calibration.PROVISIONAL
    if peaks:
        os.environ[calibration.CPU_PEAKS_ENV] = json.dumps(peaks)
    try:
        yield
        probed = {k: v for k, v in probe.probed(spec.backend).items() if k not in peaks} if first else {}
        if probed:
            try:
                store.keep_first_cpu_peaks(this_host(), spec.backend, probed, run_id)
            except (StoreError, ValueError) as exc:  # the run stands; the next one probes and keeps it
                _say(f"warning: could not keep this CPU's first probe as its provisional peak: {exc}")
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _memory_record(tracker: "peak_memory.Tracker", spec: RunSpec) -> dict | None:
    """The result's `memory`: the measured peaks beside the pre-run estimate (dashbench.memory)."""
    devices = len(tracker.meters or []) or 1
    estimate, source = peak_memory.run_estimate(spec, devices)
    return tracker.summary(estimate, memory.host_capacity(), source)


def stored_spec(db_path, run_id: str) -> RunSpec | None:
    """The spec stored in run `run_id`'s row, validated here, or None when there is no such row.
    The one way a run process learns what to measure: the job queue passes only the run id."""
    with Store(db_path) as store:
        row = store.get_run(run_id)
    return None if row is None else RunSpec.from_dict(row["spec"])


def _prepare(store: Store | None, spec, run_id: str | None) -> tuple[RunSpec, bool]:
    """The spec to run and whether its row is stored already; checks only, no writes, so bad input
    is refused before the device is waited for and before there is a row."""
    if store is not None and run_id is not None:
        row = store.get_run(run_id)
        if row is not None:
            if spec is None:
                return RunSpec.from_dict(row["spec"]), True
            _check_stored(spec, row)
            return (spec if isinstance(spec, RunSpec) else RunSpec.from_dict(dict(spec))), True
    if spec is None:
        raise StoreError(f"run_id: no run {run_id} in {store.path}, and no spec given to create it")
    spec = spec if isinstance(spec, RunSpec) else RunSpec.from_dict(dict(spec))
    # Bad input that needs no TensorFlow is an error before there is a row: no junk `failed` runs.
    # A row that already exists (queued by the job runner) goes on, so its end says what was wrong.
    if store is not None:
        from dashbench import catalog
        from dashbench.engine import presence

        catalog.check_spec(spec)
        presence.require(spec)  # a GPU or TPU that is not here: this process starts the framework anyway
    return spec, False


def _begin(store: Store, spec: RunSpec, run_id: str | None, stored: bool) -> str:
    with _deferred_signals():
        if stored:
            store.start_run(run_id, os.getpid(), this_host())
            return run_id
        return store.create_run(spec, status="running", pid=os.getpid(), host=this_host(), run_id=run_id)


def _check_stored(spec, row: dict) -> None:
    """A stored run runs its stored spec: one source of truth, never a second copy that disagrees."""
    # A field left out (of a row written before the field existed, or of a dict) has its default.
    given = spec.to_dict() if isinstance(spec, RunSpec) else {**SPEC_DEFAULTS, **spec}
    stored = {**SPEC_DEFAULTS, **row["spec"]}
    for name in [*stored, *(k for k in given if k not in stored)]:
        if given.get(name) != stored.get(name):
            raise SpecError(name, f"run {row['run_id']} is stored with {name} {stored.get(name)!r}, not "
                                  f"{given.get(name)!r}; a stored run runs its stored spec")


def _tag(exc: BaseException, run_id: str) -> None:
    """The recorded run's id travels with the error, so a caller can report it (`run --json`)."""
    try:
        exc.run_id = run_id
    except AttributeError:  # an exception type with __slots__
        pass


def _finish(writes: "store_buffer.RunWrites", run_id: str, status: str, result, error: str, recorder, state: dict,
            only_if_going: bool = False) -> None:
    # Keep what was measured before the end; a second signal must not cut this write short.
    with _deferred_signals(swallow=True), state["ending"]:
        if state["ended"]:
            return
        state["ended"] = True
        try:
            if recorder is not None:
                recorder.flush(wait=True)
        finally:
            if only_if_going:  # a presumed end: never over one a launcher already judged (store/placement.py)
                from dashbench.store.placement import end_group_run

                writes.finish(run_id, status, error=error, end=lambda store: end_group_run(
                    store, run_id, status, error, only_from=("queued", "running")))
            else:
                writes.finish(run_id, status, result=result, error=error)


def _error_text(exc: BaseException) -> str:
    if oom.is_oom(exc):  # "out of host memory (N GB of M)", "out of memory (…); tried to allocate …"
        return oom.error_text(exc, error_message(exc))
    text = error_message(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def error_message(exc: BaseException) -> str:
    """The message of `exc` without the Python trace a TensorFlow graph error carries.

    TF puts "Detected at node N defined at (most recent call last):" and a dozen `File ...` lines
    before the cause ("Received a label value of 200 ...", "OOM when allocating ..."), so a
    message cut to one line would keep the trace and lose the cause."""
    lines, in_trace = [], False
    for line in str(exc).strip().splitlines():
        if line.startswith("Detected at node") and "(most recent call last)" in line:
            in_trace = True
            continue
        if in_trace and (not line.strip() or line.startswith("  ")):
            continue  # `  File "...", line N, in f` and the blank lines between them
        in_trace = False
        if line.strip().startswith("[[{{node"):
            continue
        lines.append(line)
    return "\n".join(lines).strip()
