"""A run's writes that outlive an outage of its store (store/outage.py says which errors are one).

While the store is reachable a write goes straight to it, as before (a server's batch of samples sent
without waiting for its answer). When a write finds the store away, it and every write after it wait
here, in order, while the run goes on measuring; a thread of their own tries the store again with
backoff and writes them in order once it answers (a batch whose answer the outage swallowed is sent
again: the store takes a sample index twice as one). The run's end waits for them all. An outage
ridden out is recorded on the run (the result's `store_outage` and its flag): figures unchanged.

Past the limit (DASHBENCH_STORE_OUTAGE_S, held under the heartbeat lapse: see `limit_s`), the run
ends, and the whole run, every sample it measured and its end, goes to a local bundle that
`dashbench import` takes later (the store's copy of the run, begun before the outage, is completed by it).
What is kept is bounded by the run's own cap on samples (spec.MAX_SAMPLES).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

from dashbench import __version__
from dashbench.core.stats import FLAG_STORE_OUTAGE
from dashbench.store import OUTAGE_ENV, Store, StoreUnreachable, is_outage, iso, now, outage_s, this_host
from dashbench.store.queries import SAMPLE_COLUMNS
from dashbench.store.queue import HEARTBEAT_LAPSE_ENV, heartbeat_lapse_s

# The backoff between tries of an unreachable store: from the first to the most, doubled each time.
FIRST_PAUSE_S, MOST_PAUSE_S = 0.2, 5.0
# Samples of one run merged into one waiting write (one statement's worth, ten times over).
MERGE_SAMPLES = 5000
# Where a run's bundle goes when the store stayed away past the limit (under the user's data folder).
UNSENT_FOLDER = Path(".local") / "share" / "dashbench" / "unsent"


def limit_s(beat_every_s: float) -> float:
    """How long a run waits for its store: DASHBENCH_STORE_OUTAGE_S, but always short of the heartbeat
    lapse less one heartbeat period, so the run gives up (and bundles itself) before any other host can
    presume it dead from its silence and give its claim up."""
    return max(0.0, min(outage_s(), heartbeat_lapse_s() - 2 * beat_every_s))


class OutageLimit(BaseException):
    """The store stayed away past the limit: raised at the run's next write, in its main thread. A
    BaseException, as a cancel is, so that no library's `except Exception` keeps the run going."""


class RunStoreLost(StoreUnreachable):
    """The run ended because its store stayed away past the limit; `bundle`: where the run went."""

    def __init__(self, message: str, bundle: Path | None):
        super().__init__(message)
        self.bundle = bundle


def _say(line: str) -> None:
    """A line for the user, from either thread: past a compile's silenced descriptor 2 (as the guard says)."""
    from dashbench.engine import frameworks

    try:
        sys.stderr.flush()
        os.write(frameworks.user_stderr_fd(), (line + "\n").encode())
    except (OSError, ValueError):
        pass


class RunWrites:
    """The run process's writes to its store, in order, through any outage up to `limit_s`."""

    def __init__(self, store: Store, beat_every_s: float):
        self.store = store
        self.limit = limit_s(beat_every_s)
        self.what = "the team store" if store.is_server else "the database file"
        self.away_word = "unreachable" if store.is_server else "unwritable"  # a full or vanished disk
        self._lock = threading.Lock()
        self._waiting: list[list] = []  # [function, args, kwargs] each, oldest first: function(store, ...)
        self._unanswered = None  # the last batch sent without its answer (add_samples(wait=False))
        self._away_since = None  # time.monotonic() when the store went away (None: reachable)
        self._away_s = 0.0  # the outages ridden out so far, in all
        self._outages = 0
        self._thread = None
        self._failure = None  # a refusal met while writing what waited: raised at the next call
        self._run: dict = {}  # what the bundle needs of the run (begun)
        self._samples: dict[int, dict] = {}
        self.before = "before the run began"  # when a write given up in wait_for was made (its one line says)

    # -- what the runner calls -------------------------------------------------------------------

    def begun(self, run_id: str, spec: dict, pid: int) -> None:
        """The run's row is stored: what a bundle of it would say (its samples come with add_samples)."""
        self._run = {"run_id": run_id, "spec": spec, "pid": pid, "host": this_host(), "started_at": now()}

    def add_samples(self, run_id: str, samples: list[dict], wait: bool = False) -> None:
        for sample in samples:
            self._samples[int(sample["index"])] = dict(sample)
        self._call(Store.add_samples, (run_id, list(samples)), {"wait": wait})

    def set_phase(self, run_id: str, phase) -> None:
        self._call(Store.set_phase, (run_id, phase), {})

    def call(self, function, *args, **kwargs) -> None:
        """Any other write of the run (function(store, *args, **kwargs)), in its place among the others."""
        self._call(function, args, kwargs)

    def wait_for(self, function, *args, **kwargs):
        """A write the run cannot go on without (its row, as it begins: nothing is measured yet; a group's
        end, written by its driver), made now: tried with backoff while the store is away, up to the
        limit; its answer returned."""
        since, pause = None, FIRST_PAUSE_S
        while True:
            try:
                answer = function(self.store, *args, **kwargs)
            except Exception as exc:
                if not is_outage(exc):
                    raise
                if since is None:
                    since = time.monotonic()
                    _say(
                        f"waiting for {self.what} {self.store.path}: {_first_line(exc)} (up to {self.limit:g} s, "
                        f"{OUTAGE_ENV})"
                    )
                if time.monotonic() - since >= self.limit:
                    raise StoreUnreachable(
                        f"{self.what} {self.store.path} was {self.away_word} for {self.limit:g} s "
                        f"({OUTAGE_ENV}) {self.before}: {_first_line(exc)}"
                    ) from None
                time.sleep(pause * random.uniform(0.5, 1.5))
                pause = min(2 * pause, MOST_PAUSE_S)
                continue
            if since is not None:
                _say(f"note: {self.what} {self.store.path} answers again after {time.monotonic() - since:.1f} s")
            return answer

    def outage_record(self) -> dict | None:
        """The result's `store_outage` for the outages ridden out so far (None: there was none)."""
        return _record(self._away_s, self._outages, self, lost=False) if self._outages else None

    def finish(
        self,
        run_id: str,
        status: str,
        result: dict | None = None,
        error: str | None = None,
        samples: list[dict] | None = None,
        end=None,
    ) -> None:
        """Write the run's end after everything before it, waiting up to the limit for the store. `end`:
        a function(store) to write the end with instead of finish_run (a multi-host run's presumed end).
        Past the limit: the run, whole, goes to a local bundle, and RunStoreLost says where."""
        for sample in samples or []:
            self._samples[int(sample["index"])] = dict(sample)
        finished = now()
        if end is not None:
            item = [lambda store: end(store), (), {}]
        else:
            item = [
                _finish,
                (run_id, status),
                {"result": result, "error": error, "samples": samples, "finished_at": finished, "writes": self},
            ]
        self._call(*item, ending=True)
        while True:
            with self._lock:
                if self._failure is not None:
                    failure, self._failure = self._failure, None
                    raise failure
                if self._away_since is None and not self._waiting:
                    return
                if self._past_limit():
                    break
                thread = self._thread
            if thread is not None:
                thread.join(timeout=0.5)
            else:
                time.sleep(0.1)
        raise self._bundled(status, result, error, finished)

    # -- inside ----------------------------------------------------------------------------------

    def _call(self, function, args, kwargs, ending: bool = False) -> None:
        with self._lock:
            if self._failure is not None and not ending:
                failure, self._failure = self._failure, None
                raise failure
            if self._away_since is not None:
                if self._past_limit() and not ending:
                    raise OutageLimit(self._limit_text())
                self._keep(function, args, kwargs)
                return
            try:
                function(self.store, *args, **kwargs)
            except Exception as exc:
                if not is_outage(exc):
                    raise
                self._went_away(exc, [function, args, kwargs])
                return
            self._unanswered = (
                [function, args, {**kwargs, "wait": True}]
                if function is Store.add_samples and self.store.answer_pending
                else None
            )

    def _keep(self, function, args, kwargs) -> None:
        last = self._waiting[-1] if self._waiting else None
        if (
            function is Store.add_samples
            and last is not None
            and last[0] is Store.add_samples
            and last[1][0] == args[0]
            and len(last[1][1]) + len(args[1]) <= MERGE_SAMPLES
        ):
            last[1] = (args[0], last[1][1] + list(args[1]))
            return
        self._waiting.append([function, args, {**kwargs, "wait": True} if function is Store.add_samples else kwargs])

    def _went_away(self, exc: BaseException, item: list) -> None:
        self._away_since = time.monotonic()
        self._outages += 1
        waiting = ([self._unanswered] if self._unanswered is not None else []) + [item]
        self._unanswered = None
        for function, args, kwargs in waiting:
            self._keep(function, args, kwargs)
        _say(
            f"warning: {self.what} {self.store.path} is {self.away_word} ({_first_line(exc)}); the run goes on, "
            f"its writes wait in memory and are tried again for up to {self.limit:g} s ({OUTAGE_ENV})"
        )
        self._thread = threading.Thread(target=self._write_waiting, name="dashbench-store-retry", daemon=True)
        self._thread.start()

    def _past_limit(self) -> bool:
        return self._away_since is not None and time.monotonic() - self._away_since >= self.limit

    def _limit_text(self) -> str:
        return (
            f"{self.what} {self.store.path} was {self.away_word} for {self.limit:g} s ({OUTAGE_ENV}, "
            f"held under {HEARTBEAT_LAPSE_ENV})"
        )

    def _write_waiting(self) -> None:
        """The retry thread: the waiting writes, oldest first, each tried until it lands or the limit passes."""
        pause = FIRST_PAUSE_S
        while True:
            with self._lock:
                if not self._waiting:
                    self._back()
                    return
                if self._past_limit():
                    return  # the main thread finds it so at its next write, or its end
                # Taken off the list while it is written, so no batch coming meanwhile is merged into it.
                item = self._waiting.pop(0)
            function, args, kwargs = item
            try:
                function(self.store, *args, **kwargs)
            except Exception as exc:
                if is_outage(exc):
                    with self._lock:
                        self._waiting.insert(0, item)
                    time.sleep(pause * random.uniform(0.5, 1.5))
                    pause = min(2 * pause, MOST_PAUSE_S)
                    continue
                with self._lock:  # a refusal, not an outage: what waited behind it is dropped with it
                    self._failure, self._waiting = exc, []
                    self._back()
                return
            pause = FIRST_PAUSE_S

    def _back(self) -> None:
        if self._away_since is None:
            return
        took = time.monotonic() - self._away_since
        self._away_s += took
        self._away_since = None
        _say(
            f"note: {self.what} {self.store.path} answers again after {took:.1f} s; every write that waited "
            f"is stored, nothing lost"
        )

    def away_s(self) -> float:
        """The outages so far, the one going on included."""
        going = time.monotonic() - self._away_since if self._away_since is not None else 0.0
        return self._away_s + going

    def _bundled(self, status: str, result: dict | None, error: str | None, finished: float) -> RunStoreLost:
        """The run, whole, in a local bundle (RunStoreLost names it: a one-line end)."""
        run = self._run
        record = _record(self.away_s(), self._outages, self, lost=True)
        if result is not None:
            result = with_outage(result, record)
        if status in ("running", "queued"):
            status = "interrupted"
        bundle = {
            "format": "dashbench-bundle",
            "schema_version": _schema_version(),
            "exported_at": _dt.datetime.now(_dt.timezone.utc).isoformat(),
            "environment": {
                "host": this_host(),
                "dashbench_version": __version__,
                "source_db": str(self.store.path),
                "why": record["text"],
            },
            "sample_columns": list(SAMPLE_COLUMNS),
            "time_format": "ISO 8601, UTC",
            "runs": [
                {
                    "run_id": run.get("run_id"),
                    "status": status,
                    "spec": run.get("spec"),
                    "result": result,
                    "error": error,
                    "created_at": iso(run.get("started_at")),
                    "started_at": iso(run.get("started_at")),
                    "finished_at": iso(finished),
                    "pid": run.get("pid"),
                    "host": run.get("host"),
                    "sweep_id": None,
                    "samples": [
                        [s["index"], s["steps"], s["duration_s"], s.get("loss"), bool(s.get("warmup", False))]
                        for _i, s in sorted(self._samples.items())
                    ],
                }
            ],
        }
        path = _write_bundle(run.get("run_id") or "run", bundle)
        where = (
            f"; the run and its {len(self._samples)} samples are in {path}: `python -m dashbench import {path}` "
            f"once the store is back"
            if path
            else "; no local file could take the run either"
        )
        lost = RunStoreLost(f"{self._limit_text()}: the run stopped{where}", path)
        lost.run_id = run.get("run_id")  # for `run --json`'s error object, as the runner tags its errors
        return lost


def _finish(
    store: Store,
    run_id: str,
    status: str,
    result=None,
    error=None,
    samples=None,
    finished_at=None,
    writes: RunWrites | None = None,
) -> None:
    """The run's end as it is written: its result given the outages known by then (one may be ending now)."""
    if result is not None and writes is not None and writes.away_s() > 0:
        result = with_outage(result, _record(writes.away_s(), max(writes._outages, 1), writes, lost=False))
    store.finish_run(run_id, status, result=result, error=error, samples=samples, finished_at=finished_at)


def _record(seconds: float, outages: int, writes: RunWrites, lost: bool) -> dict:
    tail = "the run stopped and went to a local bundle" if lost else "nothing lost"
    return {
        "seconds": round(seconds, 1),
        "outages": outages,
        "text": f"{writes.what} was {writes.away_word} for {seconds:.1f} s; {tail}",
    }


def with_outage(result: dict, record: dict) -> dict:
    """The result dict with the outage recorded: its `store_outage` and the flag (figures unchanged)."""
    flags = list(result.get("flags") or [])
    return {
        **result,
        "store_outage": record,
        "flags": flags + ([FLAG_STORE_OUTAGE] if FLAG_STORE_OUTAGE not in flags else []),
    }


def _schema_version() -> int:
    from dashbench.store import schema

    return schema.SCHEMA_VERSION


def _write_bundle(run_id: str, bundle: dict) -> Path | None:
    """The bundle in the user's data folder, else the temporary folder (the data folder may be on the disk
    that filled up); None when neither takes it."""
    text = json.dumps(bundle, default=str)
    for folder in (Path.home() / UNSENT_FOLDER, Path(tempfile.gettempdir())):
        path = folder / f"dashbench-unsent-{run_id}.json"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            aside = path.with_name(path.name + f".{os.getpid()}.tmp")
            aside.write_text(text)
            os.replace(aside, path)
            return path
        except OSError:
            continue
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
