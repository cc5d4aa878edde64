"""Run the engine inside this process and record the run in the store: the measured part of a run's
life, which run_life.py hands over once the run's spec, model file and memory are checked.

The row exists before the first step (so a crash leaves a trace, never nothing), samples land while
the run goes (so a SIGKILL keeps what was measured), and the end is always written: `done` with the
result, `failed` with the error text, or `cancelled` on SIGTERM/SIGINT.

Two helpers stand beside it: run_signals.py turns a cancel signal (or the guard's out-of-memory stop)
into an exception in the main thread, never in the middle of a store write; run_guard.py watches
the run from a thread of its own and ends the process when the main thread cannot.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Callable

from dashbench.core.accuracy import final_status
from dashbench.core.spec import SPEC_DEFAULTS, RunSpec, SpecError
from dashbench.core.stats import FLAG_DEVICE_SHARED
from dashbench.engine import peak_memory
from dashbench.hardware import host
from dashbench.jobs import device_lock, multihost, oom, store_buffer, temp_folder
from dashbench.jobs.run_guard import beat_every_s, guarded, say
from dashbench.jobs.run_signals import (
    RunCancelled,
    cancel_on_signals,
    deferred_signals,
    mark_ending,
    raise_lost_stop,
    stop_behind,
)
from dashbench.results.result import RunResult
from dashbench.store import Store, StoreError, new_run_id, now, this_host

# Samples are committed at least this often; between commits they wait in memory.
FLUSH_EVERY_S = 0.2
FLUSH_EVERY_N = 100
# A run's writes wait this long (after SQLite's busy timeout, with backoff) for a write lock that
# another process holds, rather than fail a run whose samples are in memory.
WRITE_RETRY_S = 600.0


class _Recorder:
    """Turns engine events into store writes (through the run's RunWrites), batching samples by time."""

    def __init__(
        self, store: "store_buffer.RunWrites | None", run_id: str | None, on_event: Callable[[dict], None] | None
    ):
        self.store, self.run_id, self.on_event = store, run_id, on_event
        self.pending: list[dict] = []
        self.last_flush = time.monotonic()

    def __call__(self, event: dict) -> None:
        if self.store is not None:
            kind = event.get("event")
            if kind == "sample":
                if len(self.pending) >= FLUSH_EVERY_N:  # a full batch goes when the next sample comes, so
                    self.flush()  # a run's last batch goes with its end (execute)
                self.pending.append(event)
                if time.monotonic() - self.last_flush >= FLUSH_EVERY_S:
                    self.flush()
            elif kind in ("phase", "evaluation"):
                # A to-accuracy run's evaluation line ("epoch 3 of ≤ 20: validation accuracy 0.874")
                # is its phase: the live panel shows it and draws its bar from it.
                self.flush()
                with deferred_signals():
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
        with deferred_signals():
            # Not waited for on a server: the run trains on while the batch travels (its answer is read
            # by the run's next write, which raises if it was not stored).
            self.store.add_samples(self.run_id, self.pending, wait=wait)
        self.pending = []
        self.last_flush = time.monotonic()


@temp_folder.in_own_folder  # TensorFlow's autograph files go there, gone at the run's end
def execute(
    spec: RunSpec | None,
    db_path=None,
    run_id: str | None = None,
    record: bool = True,
    on_event: Callable[[dict], None] | None = None,
    device_wait: str = device_lock.WAIT,
    store: Store | None = None,
    checked: bool = False,
) -> RunResult:
    """Run `spec` with `dashbench.engine.loop.run`, recording it. Returns the result with its run_id
    (None when not recorded).

    With `run_id`, an existing queued row (e.g. from the job runner) is started with the spec stored
    in it: pass None, or the spec `stored_spec` read from that row; a different spec is refused. A
    `run_id` with no row makes a new row under that id. Errors are recorded (`failed`, with the
    error text) and then raised again.

    The device's lock (device_lock) is held from before the engine starts to the run's end.
    `device_wait`: WAIT for a held device (phase "waiting for the device …"), NO_WAIT raises
    DeviceBusy before any row is written, SHARE measures beside the holder, flagged device_shared.
    `store`: the run's store, open already (its owner closes it), else opened here at `db_path`.
    `checked`: catalog.check_spec has passed `spec` in this process already (run_life.py)."""
    from dashbench.engine import loop  # looked up per call, so tests can swap loop.run

    owned = record and store is None
    if owned:
        store = Store(db_path, write_retry_s=WRITE_RETRY_S)
    elif not record:
        store = None
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
        with cancel_on_signals() as wake_fd, guarded(store, wake_fd) as state:
            state_of_run = state
            if store is None and spec is None:
                raise ValueError("spec: a spec is required when the run is not recorded")
            spec, stored = _prepare(store, spec, run_id, checked)
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
                    {"event": "phase", "phase": f"waiting for the device ({kind}: in use by {holder})"}
                )

            try:
                with device_lock.hold(spec.device, device_wait, run_id, on_wait=waiting, before_wait=begin) as holding:
                    begin()
                    run_id = state["run_id"]
                    holding.name_run(run_id)
                    tracker = peak_memory.Tracker()
                    tracker.backend = spec.backend
                    recorder = _Recorder(None if later_worker else writes, run_id, tracker.watching(on_event))
                    with _calibrated_cpu_peaks(None if later_worker else store, spec, run_id) as cpu_peak:
                        result = loop.run(spec, on_event=recorder)
                    raise_lost_stop()
                    if result.device == "cpu" and result.peak_tflops:  # when the MFU's denominator was measured
                        result = result.replace(peak_as_of=cpu_peak["as_of"] or now())
                    # The last samples wait for the run's end and are written with it (one write fewer);
                    # an end by an error below writes them first (_finish).
                    result = result.replace(memory=_memory_record(tracker, spec))
                    if holding.shared:
                        result = result.replace(flags=[*result.flags, FLAG_DEVICE_SHARED])
                    if role is not None and store is not None:
                        entry = multihost.placement_entry(result, role.index, this_host())
                        if later_worker:
                            return _join_run(store, role, entry, result, run_id)
                        result = result.replace(
                            placement=multihost.merged_placement(result.placement, entry, role.count)
                        )
            except BaseException as caught:
                mark_ending()
                run_id = state["run_id"]
                # A stop raised into a library may come back as the library's own error: still the stop.
                exc = stop_behind(caught) or caught
                if store is not None and state["begun"]:
                    status, error = _end_of(exc, role)
                    # A multi-host run's process is cancelled by its launcher after a lost host or a
                    # failed worker ended the run: that end, already written, stays (fleet/slices.py).
                    going = status == "interrupted" or (status == "cancelled" and role is not None)
                    _finish(writes, run_id, status, None, error, recorder, state, only_if_going=going)
                    _tag(exc, run_id)
                if exc is caught:
                    raise
                raise exc from caught
            with deferred_signals(swallow=True), state["ending"]:
                mark_ending()
                state["ended"] = True
                result = result.replace(run_id=run_id)
                if store is not None:
                    # not_reached: a to-accuracy run whose target at most half its seeds reached.
                    writes.finish(
                        run_id, final_status(result.accuracy), result=result.to_dict(), samples=recorder.take()
                    )
            return result
    finally:
        if state_of_run.get("set_run_id_env"):
            os.environ.pop(multihost.RUN_ID_ENV, None)
        if owned:
            store.close()


def _end_of(exc: BaseException, role: "multihost.Role | None") -> tuple[str, str]:
    """(status, error) of a run that `exc` ended."""
    if isinstance(exc, RunCancelled):
        return "cancelled", str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return "cancelled", error_text(exc)
    if isinstance(exc, store_buffer.OutageLimit):  # its end and samples go to a local bundle
        return "interrupted", str(exc)
    error = error_text(exc)
    if oom.is_oom(exc):
        return oom.STATUS, error
    if role is not None and multihost.peer_lost(error):
        # Not this host's failure: a peer stopped answering. Presumed, so the launcher
        # (fleet/slices.py) may still name the lost host or the failed worker.
        return "interrupted", f"a peer host of this {role.count}-host run stopped answering: {error}"
    return "failed", error


def _join_run(store: Store, role: "multihost.Role", entry: dict, result: RunResult, run_id: str | None) -> RunResult:
    """A later worker's end: its host and devices added to worker 0's run (which may take the id
    from the engine: JAX hands worker 0's on), nothing else written."""
    from dashbench.store.placement import add_to_placement

    run_id = multihost.agreed_run_id(run_id)
    if run_id is None:
        say(multihost.missing_id_warning(role))
        return result
    if not add_to_placement(
        store,
        run_id,
        lambda placement: multihost.merged_placement(placement, entry, role.count),
        wait_s=multihost.join_wait_s(),
    ):
        say(f"warning: worker {role.index} could not add its host to run {run_id}: worker 0 wrote no result")
    return result.replace(run_id=run_id)


@contextlib.contextmanager
def _calibrated_cpu_peaks(store: Store | None, spec: RunSpec, run_id: str | None = None):
    """A CPU run measures its MFU against the best CPU peak this host's calibrations reached
    (`dashbench doctor`), handed to the engine in its environment, rather than a probe taken under
    the run's own load. No calibration yet: against the host's first CPU probe, kept in the store
    (the first run's own), so that early runs compare — peak_source "provisional". Either way one
    probe (numpy's BLAS, float32) serves every backend and precision, so a host has one CPU peak.
    Yields a dict that gets "as_of": when the peak it handed over was measured (None: this run's own)."""
    from dashbench.engine import calibration, probe

    cpu = store is not None and spec.device in ("cpu", "auto")
    peaks, as_of = calibrated_cpu_peak(store) if cpu else ({}, None)
    saved = {name: os.environ.get(name) for name in (calibration.CPU_PEAKS_ENV, calibration.CPU_PEAK_SOURCE_ENV)}
    # A peak given by hand (DASHBENCH_CPU_PEAKS, a probe taken on a quiet machine) counts too: the best wins.
    given = calibration.cpu_peak(probe.CPU_PROBE_DTYPE)
    if given is not None and given > peaks.get(probe.CPU_PROBE_DTYPE, 0.0):
        peaks, as_of = {probe.CPU_PROBE_DTYPE: given}, None
    first = not peaks and cpu
    if first:
        peaks, as_of = first_cpu_probe(store)
        os.environ[calibration.CPU_PEAK_SOURCE_ENV] = calibration.PROVISIONAL
    if peaks:
        os.environ[calibration.CPU_PEAKS_ENV] = json.dumps(peaks)
    found = {"as_of": as_of}
    try:
        yield found
        probed = {k: v for k, v in probe.probed().items() if k not in peaks} if first else {}
        if probed:
            try:
                store.keep_first_cpu_peaks(this_host(), probe.CPU_PROBE, probed, run_id)
            except (StoreError, ValueError) as exc:  # the run stands; the next one probes and keeps it
                say(f"warning: could not keep this CPU's first probe as its provisional peak: {exc}")
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def calibrated_cpu_peak(store: Store) -> tuple[dict, str | None]:
    """({"float32": the best calibrated CPU peak of this host}, when it was measured), or ({}, None)."""
    from dashbench.engine import probe

    best, as_of = 0.0, None
    for row in store.calibrations(this_host(), "cpu"):
        value = (row.get("peaks") or {}).get(probe.CPU_PROBE_DTYPE)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > best:
            best, as_of = float(value), row.get("created_at")
    return ({probe.CPU_PROBE_DTYPE: best}, as_of) if best > 0 else ({}, None)


def first_cpu_probe(store: Store) -> tuple[dict, str | None]:
    """This host's first CPU probe ({"float32": TFLOP/s}) and when it was taken, or ({}, None)."""
    from dashbench.engine import probe

    host = this_host()
    for row in store.first_cpu_probes():
        if row["host"] == host and row["backend"] == probe.CPU_PROBE and row["dtype"] == probe.CPU_PROBE_DTYPE:
            return {row["dtype"]: float(row["tflops"])}, row.get("created_at")
    return {}, None


def _memory_record(tracker: "peak_memory.Tracker", spec: RunSpec) -> dict | None:
    """The result's `memory`: the measured peaks beside the pre-run estimate (dashbench.workloads.memory)."""
    devices = len(tracker.meters or []) or 1
    estimate, source = peak_memory.run_estimate(spec, devices)
    return tracker.summary(estimate, host.host_capacity(), source)


def stored_spec(db_path, run_id: str) -> RunSpec | None:
    """The spec stored in run `run_id`'s row, validated here, or None when there is no such row.
    The one way a run process learns what to measure: the job queue passes only the run id."""
    with Store(db_path) as store:
        row = store.get_run(run_id)
    return None if row is None else RunSpec.from_dict(row["spec"])


def _prepare(store: Store | None, spec: RunSpec | None, run_id: str | None, checked: bool) -> tuple[RunSpec, bool]:
    """The spec to run and whether its row is stored already; checks only, no writes, so bad input
    is refused before the device is waited for and before there is a row."""
    if store is not None and run_id is not None:
        row = store.get_run(run_id)
        if row is not None:
            if spec is None:
                return RunSpec.from_dict(row["spec"]), True
            _check_stored(spec, row)
            return spec, True
    if spec is None:
        raise StoreError(f"run_id: no run {run_id} in {store.path}, and no spec given to create it")
    # Bad input that needs no TensorFlow is an error before there is a row: no junk `failed` runs.
    # A row that already exists (queued by the job runner) goes on, so its end says what was wrong.
    if store is not None:
        from dashbench.engine import presence
        from dashbench.workloads import catalog

        if not checked:
            catalog.check_spec(spec)
        presence.require(spec)  # a GPU or TPU that is not here: this process starts the framework anyway
    return spec, False


def _begin(store: Store, spec: RunSpec, run_id: str | None, stored: bool) -> str:
    with deferred_signals():
        if stored:
            store.start_run(run_id, os.getpid(), this_host())
            return run_id
        return store.create_run(spec, status="running", pid=os.getpid(), host=this_host(), run_id=run_id)


def _check_stored(spec: RunSpec, row: dict) -> None:
    """A stored run runs its stored spec: one source of truth, never a second copy that disagrees."""
    # A field left out (of a row written before the field existed) has its default.
    given = spec.to_dict()
    stored = {**SPEC_DEFAULTS, **row["spec"]}
    for name in [*stored, *(k for k in given if k not in stored)]:
        if given.get(name) != stored.get(name):
            raise SpecError(
                name,
                f"run {row['run_id']} is stored with {name} {stored.get(name)!r}, not "
                f"{given.get(name)!r}; a stored run runs its stored spec",
            )


def _tag(exc: BaseException, run_id: str) -> None:
    """The recorded run's id travels with the error, so a caller can report it (`run --json`)."""
    try:
        exc.run_id = run_id
    except AttributeError:  # an exception type with __slots__
        pass


def _finish(
    writes: "store_buffer.RunWrites",
    run_id: str,
    status: str,
    result,
    error: str,
    recorder,
    state: dict,
    only_if_going: bool = False,
) -> None:
    # Keep what was measured before the end; a second signal must not cut this write short.
    with deferred_signals(swallow=True), state["ending"]:
        if state["ended"]:
            return
        state["ended"] = True
        try:
            if recorder is not None:
                recorder.flush(wait=True)
        finally:
            if only_if_going:  # a presumed end: never over one a launcher already judged (store/placement.py)
                from dashbench.store.placement import end_group_run

                writes.finish(
                    run_id,
                    status,
                    error=error,
                    end=lambda store: end_group_run(store, run_id, status, error, only_from=("queued", "running")),
                )
            else:
                writes.finish(run_id, status, result=result, error=error)


def error_text(exc: BaseException) -> str:
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
