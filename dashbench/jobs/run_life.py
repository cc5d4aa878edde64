"""A run's life in the process that runs it, from a parsed spec to its stored end: `run` and `preset`
come here, and so does every queued, swept or fleet run (each launcher starts `dashbench run --run-id`).

In order: the spec (the caller's, or the stored row's for a stored run's id), checked once in this
process; a model file imported and built, within its time limit (engine/workloads/user.prepare); the
setup phase, in which a backend may compile one step for its memory analysis; the memory check (a
stored row past it ends `oom`, a new run is refused); read-only mode refused; then the runner
(runner.py) measures and records. The store is opened once, when it is first needed, and handed along.
Every end comes back as an End, which the command words (cli/run_cmd.py): nothing here prints but the
memory warning, through the caller's `warn`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from dashbench.core.errors import one_line
from dashbench.core.spec import RunSpec, SpecError, is_user_model
from dashbench.jobs import children, device_lock, multihost, oom, run_guard, run_signals, runner, store_buffer
from dashbench.results.result import RunResult
from dashbench.store import Store, StoreError, StoreUnreachable, refuse_if_read_only


@dataclass(frozen=True)
class Ask:
    """What a command asks of a run. `options`: the spec its options give, built only when one is
    needed (a stored run's id runs the stored spec); `given`: the spec options typed, refused beside a
    stored run's id; `checked`: the caller checked the spec in this process already (a preset's);
    `follow(spec)`: the run's events' listener, once its spec is known; `warn`: the memory warning's
    words; `last_word(end)`: an end said just before the process ends itself from a thread."""

    options: Callable[[], RunSpec] | None = None
    given: tuple[str, ...] = ()
    run_id: str | None = None
    db: object = None
    record: bool = True
    device_wait: str = device_lock.WAIT
    checked: bool = False
    follow: Callable[[RunSpec], Callable[[dict], None] | None] | None = None
    warn: Callable[[str], None] = run_guard.say
    last_word: Callable[["End"], None] | None = None


@dataclass(frozen=True)
class End:
    """How a run ended: "done" (its result, which a to-accuracy run may have ended not_reached),
    "invalid" (bad input, `field` named), "failed", "oom", "cancelled" or "interrupted", with the exit
    code `run` gives it, the one-line error, and the run's id where a row holds it."""

    status: str
    code: int
    error: str | None = None
    field: str | None = None
    run_id: str | None = None
    spec: RunSpec | None = None
    result: RunResult | None = None


def live(ask: Ask) -> End:
    """The run's whole life in this process; see the module's words."""
    life = _Life(ask)
    try:
        return life.go()
    finally:
        life.close()


class _Life:
    def __init__(self, ask: Ask):
        self.ask = ask
        self.store: Store | None = None
        self.spec: RunSpec | None = None

    def open_store(self) -> Store:
        if self.store is None:
            self.store = Store(self.ask.db, write_retry_s=runner.WRITE_RETRY_S)
        return self.store

    def close(self) -> None:
        if self.store is not None:
            self.store.close()

    def go(self) -> End:
        try:
            self.spec, stored_row = self.resolve()
        except SpecError as exc:
            return End("invalid", 2, str(exc), exc.field)
        on_event = self.ask.follow(self.spec) if self.ask.follow is not None else None
        try:
            # Everything of the user's (their model file's import, builder, first calls) runs in here:
            # every process it starts ends with the run.
            with children.ending_with_run(), _last_words(self.spec, self.ask.last_word):
                refused = self.before_run(stored_row)
                if refused is None:
                    if self.ask.record:
                        refuse_if_read_only("record a run")
                    store = self.open_store() if self.ask.record else None
                    result = runner.execute(
                        self.spec,
                        run_id=self.ask.run_id,
                        record=self.ask.record,
                        on_event=on_event,
                        device_wait=self.ask.device_wait,
                        store=store,
                        checked=self.ask.checked or is_user_model(self.spec),
                    )
            if refused is not None:
                return self.refused_row(refused)
            return End("done", 0, run_id=result.run_id, spec=self.spec, result=result)
        except (Exception, KeyboardInterrupt, run_signals.RunCancelled, run_signals.OutOfHostMemory) as exc:
            return self.end_of(exc)

    def resolve(self) -> tuple[RunSpec, bool]:
        """The spec to run and whether it is a stored row's (the id of a stored run), else the options'."""
        ask = self.ask
        if ask.run_id is not None and ask.record:
            try:
                row = self.open_store().get_run(ask.run_id)
            except StoreError as exc:
                raise SpecError("db", one_line(exc)) from None
            stored = None if row is None else RunSpec.from_dict(row["spec"])
            given = ask.given
            if stored is not None and given and _later_worker():
                # Every host of a hand-started multi-host run gets the same command; worker 0 may have
                # stored it already. The runner checks the options against the stored spec.
                return ask.options(), False
            if stored is not None and given:
                option = "--" + given[0].replace("_", "-")
                raise SpecError(
                    given[0],
                    f"run {ask.run_id} is stored with its spec, which --run-id runs as "
                    f"stored; leave out {option} (and every other spec option)",
                )
            if stored is not None:
                return stored, True
            if not given:
                raise SpecError(
                    "run_id",
                    f"no run {ask.run_id} is stored in the database; give --model and "
                    "--batch-size to record a new run under this id",
                )
        return ask.options(), False

    def before_run(self, stored_row: bool) -> str | None:
        """A model file's checks, then the memory estimate's; a stored row's memory refusal is returned
        (its error, for the row to end `oom`), every other refusal raised."""
        from dashbench.workloads import catalog, memory

        spec = self.spec
        if is_user_model(spec):
            try:
                from dashbench.engine.workloads import user

                shapes = None if stored_row or self.ask.checked else catalog.check_spec(spec)
                # The model file is imported here, in the run's own process; its memory checked before
                # its weights are made.
                user.prepare(spec, memory.check, shapes=shapes)
            except SpecError as exc:
                if stored_row and getattr(exc, "before_build", False):
                    return f"out of memory before it started: {exc}"
                if stored_row:
                    self.store.finish_run(self.ask.run_id, "failed", error=str(exc))
                raise
        from dashbench.engine import backends

        if stored_row:
            self.say_phase("setup")  # a step compiled here is the run setting up
        backends.get(spec.backend).before_run(spec)  # JAX: the guard then checks XLA's bytes for the step
        try:
            warning = memory.check(spec)
        except SpecError as exc:
            if not stored_row:
                raise
            return f"out of memory before it started: {exc}"
        if warning:
            self.ask.warn(warning)
        return None

    def say_phase(self, phase: str) -> None:
        """The run's phase, for whoever follows it; a store that does not answer only leaves it unsaid."""
        try:
            self.store.set_phase(self.ask.run_id, phase)
        except (StoreError, StoreUnreachable):
            pass

    def refused_row(self, error: str) -> End:
        """A stored run that its own process finds cannot fit: its row ends `oom`, never runs."""
        self.store.finish_run(self.ask.run_id, oom.STATUS, error=error)
        return End(oom.STATUS, oom.EXIT_CODE, error, run_id=self.ask.run_id, spec=self.spec)

    def end_of(self, exc: BaseException) -> End:
        """The End of a run that `exc` ended (the runner has recorded it where a row holds it)."""
        spec, stored_id = self.spec, getattr(exc, "run_id", None)
        if isinstance(exc, SpecError):
            return End("invalid", 2, str(exc), exc.field, stored_id, spec)
        if isinstance(exc, device_lock.DeviceBusy):  # no wait asked: refused before any row was written
            return End("invalid", 2, f"device: {exc}", "device", spec=spec)
        if isinstance(exc, store_buffer.RunStoreLost):  # measured, but its store stayed away: a bundle has it
            return End("interrupted", 1, str(exc), run_id=stored_id, spec=spec)
        if isinstance(exc, StoreError):  # the database cannot be opened or written: bad input
            return End("invalid", 2, "db: " + one_line(exc).removeprefix("db: "), "db", stored_id, spec)
        if isinstance(exc, KeyboardInterrupt):
            return End("cancelled", 130, "interrupted", run_id=stored_id, spec=spec)
        if isinstance(exc, run_signals.RunCancelled):  # a signal; already recorded as cancelled
            return End("cancelled", exc.exit_code, str(exc), run_id=stored_id, spec=spec)
        if oom.is_oom(exc):  # "out of host memory (N GB of M)", "out of memory (…); tried to allocate …"
            return End(oom.STATUS, oom.EXIT_CODE, runner.error_text(exc), run_id=stored_id, spec=spec)
        error = f"{type(exc).__name__}: {one_line(runner.error_message(exc))}"
        return End("failed", 1, error, run_id=stored_id, spec=spec)


def _later_worker() -> bool:
    found = multihost.role()
    return found is not None and not found.writes_run


class _last_words:
    """The run's end is said even when the process ends itself from a thread (a stuck run cancelled,
    a run out of host memory: run_guard.py; a user's code stuck past its time limit:
    engine/workloads/user_import.py), and its children are ended."""

    def __init__(self, spec: RunSpec, say: Callable[[End], None] | None):
        self.spec, self.say = spec, say

    def hook(self, status: str, error: str, run_id: str | None) -> None:
        if self.say is not None:  # the process's exit code is the guard's own
            self.say(End(status, 1, error, run_id=run_id, spec=self.spec))

    def stuck(self, line: str) -> None:
        error = line.removeprefix("error: ")
        if self.say is not None:
            self.say(End("invalid", 2, error, error.partition(":")[0], spec=self.spec))
        children.end_now()

    def __enter__(self):
        from dashbench.engine.workloads import user_import

        run_guard.HARD_EXIT_HOOKS.append(self.hook)
        user_import.STUCK_HOOKS.append(self.stuck)
        return self

    def __exit__(self, *exc) -> None:
        from dashbench.engine.workloads import user_import

        run_guard.HARD_EXIT_HOOKS.remove(self.hook)
        user_import.STUCK_HOOKS.remove(self.stuck)
