"""What an imported run may hold: every field checked against what the engine and the store write,
so that a run accepted from a bundle can always be read back by `list`, Compare and Results.

Each check raises InvalidField, whose text is "field: why" on one line. No TensorFlow here.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from dashbench.core import stats
from dashbench.core.spec import BACKENDS, ID_RULE, MAX_SAMPLES, TEXT_LIMIT, RunSpec, SpecError, check_id, check_text
from dashbench.hardware import peaks
from dashbench.results.result import RunResult, json_fields

# SQLite's INTEGER is 64-bit signed: a larger int cannot be stored at all.
INT_LIMIT = 2**63
PID_LIMIT = 2**32
# A run's error is a message, not a log: the store keeps at most this much of it (clipped_error), and an
# import refuses more.
MAX_ERROR_CHARS = 10_000
EARLIEST = _dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc)
RUN_ID = ID_RULE  # the rule `run` and the job queue apply too (dashbench.core.spec.check_id)
_RESULT_KEYS = frozenset(f.name for f in json_fields())


class InvalidField(ValueError):
    """One field of a run that the store cannot hold; the text names the field."""


def whole(name: str, value: Any, low: int = 0, high: int = INT_LIMIT, null: bool = False) -> None:
    if value is None and null:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidField(f"{name}: must be a whole number{' or null' if null else ''}, got {_short(value)}")
    if not low <= value < high:
        raise InvalidField(f"{name}: must be a whole number from {low} to {high - 1}, got {_short(value)}")


def number(name: str, value: Any, low: float | None = 0.0, null: bool = False) -> None:
    if value is None and null:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidField(f"{name}: must be a number{' or null' if null else ''}, got {_short(value)}")
    if not math.isfinite(value):
        raise InvalidField(f"{name}: must be a finite number, got {value!r}")
    if low is not None and value < low:
        raise InvalidField(f"{name}: must be >= {low:g}, got {value!r}")


def text(name: str, value: Any, null: bool = True, limit: int | None = TEXT_LIMIT) -> None:
    if value is None and null:
        return
    if not isinstance(value, str):
        raise InvalidField(f"{name}: must be text{' or null' if null else ''}, got {_short(value)}")
    if limit is not None and len(value) > limit:
        raise InvalidField(f"{name}: longer than {limit} characters")


def check_spec(spec: Any) -> dict:
    """The spec as RunSpec reads it, plus what SQLite can hold; returns its canonical dict."""
    if not isinstance(spec, dict):
        raise InvalidField(f"spec: must be an object, got {_short(spec)}")
    try:
        out = RunSpec.from_dict(spec).to_dict()
    except (SpecError, TypeError) as exc:
        raise InvalidField(f"spec: {exc}") from None
    for name, value in out.items():
        if isinstance(value, int) and not isinstance(value, bool):
            whole(f"spec: {name}", value)
    return out


def check_samples(samples: Any, columns: tuple) -> list[list]:
    """Samples as lists in `columns` order (index, steps, duration_s, loss, warmup); returns them as stored."""
    if samples is None:
        return []
    if not isinstance(samples, list):
        raise InvalidField(f"samples: must be a list, got {_short(samples)}")
    if len(samples) > MAX_SAMPLES:
        raise InvalidField(f"samples: {len(samples)} samples; a run holds at most {MAX_SAMPLES} (one per host loop)")
    seen: set[int] = set()
    out = []
    for i, sample in enumerate(samples):
        where = f"samples[{i}]"
        if not isinstance(sample, list) or len(sample) != len(columns):
            raise InvalidField(f"{where}: expected a list of {len(columns)} values {list(columns)}")
        idx, steps, duration_s, loss, warmup = sample
        whole(f"{where}.index", idx)
        if idx in seen:
            raise InvalidField(f"{where}.index: {idx} appears twice")
        seen.add(idx)
        whole(f"{where}.steps", steps, low=1)
        number(f"{where}.duration_s", duration_s)
        number(f"{where}.loss", loss, low=None, null=True)
        if not isinstance(warmup, bool):
            raise InvalidField(f"{where}.warmup: must be true or false, got {_short(warmup)}")
        out.append([idx, steps, float(duration_s), None if loss is None else float(loss), warmup])
    return out


def check_times(run: dict, names=("created_at", "started_at", "finished_at")) -> dict:
    """ISO times within EARLIEST..now+1 day and in order; returns them as epoch seconds (None kept)."""
    latest = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(days=1)
    out: dict[str, float | None] = {}
    previous = None
    for name in names:
        value = run.get(name)
        if value is None:
            out[name] = None
            continue
        if not isinstance(value, str):
            raise InvalidField(f"{name}: must be an ISO 8601 time, got {_short(value)}")
        try:
            moment = _dt.datetime.fromisoformat(value)
        except ValueError:
            raise InvalidField(f"{name}: not an ISO 8601 time: {_short(value)}") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=_dt.timezone.utc)
        if not EARLIEST <= moment <= latest:
            raise InvalidField(f"{name}: {value} is outside {EARLIEST:%Y-%m-%d} .. tomorrow")
        if previous is not None and moment < previous[1]:
            raise InvalidField(f"{name}: {value} is before {previous[0]}")
        previous = (name, moment)
        out[name] = moment.timestamp()
    return out


def check_run_fields(run: dict) -> None:
    """run_id, pid, host, label, sweep_id and error: their types and sizes."""
    try:
        # The same rules as `run`, `sweep` and the job queue: what they store, import takes back.
        check_id("run_id", run.get("run_id"))
        check_id("sweep_id", run.get("sweep_id"), null=True)
        check_text("label", run.get("label"))
    except SpecError as exc:
        raise InvalidField(str(exc)) from None
    whole("pid", run.get("pid"), high=PID_LIMIT, null=True)
    text("host", run.get("host"))
    text("error", run.get("error"), limit=MAX_ERROR_CHARS)


def check_result(result: Any) -> None:
    if result is not None:
        if not isinstance(result, dict):
            raise InvalidField(f"result: must be a JSON object or null, got {_short(result)}")
        try:
            RunResult.check(result)  # its messages start with the key: "examples_per_sec: …"
        except ValueError as exc:
            raise InvalidField(f"result.{exc}") from None
        # RunResult.from_dict keeps a newer writer's keys; a bundle is only read up to this schema,
        # so a key no dashbench of this schema writes is a damaged or hand-made result.
        unknown = sorted(set(result) - _RESULT_KEYS)
        if unknown:
            key = unknown[0] if unknown[0].isidentifier() and len(unknown[0]) <= 60 else _short(unknown[0])
            raise InvalidField(f"result.{key}: unknown field (not one dashbench writes)")
        backend = result.get("backend")
        if backend is not None and backend not in BACKENDS:
            # A filter column: a name no dashbench writes would be a filter value nothing can choose.
            raise InvalidField(
                f"result.backend: unknown backend {_short(backend)}; choose one of: "
                f"{', '.join(BACKENDS)} (or leave it out: tensorflow)"
            )
        text("result.backend_version", result.get("backend_version"), limit=100)
        losses = result.get("losses")
        if isinstance(losses, list) and len(losses) > MAX_SAMPLES:
            raise InvalidField(
                f"result.losses: {len(losses)} losses; a run holds at most {MAX_SAMPLES} (one per host loop)"
            )


# What the engine copies from the spec into a result (engine/measured.py), and its default there.
_FROM_SPEC = (
    ("model", "model", None),
    ("global_batch_size", "batch_size", None),
    ("backend", "backend", "tensorflow"),
    ("precision", "precision", None),
    ("data", "data", None),
)


def check_agreement(status: str, spec: dict, result: dict | None) -> None:
    """A run whose parts contradict each other (checked one by one above) is refused: a done run
    has a result, the result measured the run's spec, and its 95% interval holds its figure."""
    if result is None:
        if status in ("done", "not_reached"):
            raise InvalidField(f"result: a {status} run has a result; this one has none")
        return
    for key, spec_key, default in _FROM_SPEC:
        value = result.get(key) if result.get(key) is not None else default
        if value is not None and value != spec[spec_key]:
            raise InvalidField(
                f"result.{key}: {_short(value)} differs from the run's spec ({spec_key} {_short(spec[spec_key])})"
            )
    inner = result.get("spec") or {}
    for key in ("model", "batch_size"):
        if key in inner and inner[key] != spec[key]:
            raise InvalidField(
                f"result.spec.{key}: {_short(inner[key])} differs from the run's spec ({key} {_short(spec[key])})"
            )
    _check_memory_agrees(result.get("memory"))
    low, high = (list(result.get("examples_per_sec_ci95") or []) + [None, None])[:2]
    figure = result.get("examples_per_sec")
    if _finite(low) and _finite(high) and low > high:
        raise InvalidField(f"result.examples_per_sec_ci95: its low end {low:g} is above its high end {high:g}")
    repeats = result.get("repeats")
    # With repeats the figure is their median, not the pooled mean the interval is around.
    if _finite(figure) and not (isinstance(repeats, list) and len(repeats) > 1):
        slack = 1e-9 * figure  # rounding of the stored floats
        if (_finite(low) and figure < low - slack) or (_finite(high) and figure > high + slack):
            raise InvalidField(
                f"result.examples_per_sec_ci95: [{low:g}, {high if high is None else f'{high:g}'}] "
                f"excludes the run's own throughput {figure:g}"
            )


def _check_memory_agrees(mem: Any) -> None:
    """The memory record's ratio is its peak over its estimate, and no window holds more than the run."""
    if not isinstance(mem, dict):
        return
    peak, estimate, ratio = mem.get("peak_bytes"), mem.get("estimate_bytes"), mem.get("estimate_ratio")
    if (
        _finite(peak)
        and _finite(estimate)
        and estimate > 0
        and _finite(ratio)
        and abs(ratio - peak / estimate) > 1e-6 * max(1.0, ratio)
    ):
        raise InvalidField(
            f"result.memory.estimate_ratio: {ratio:g} is not peak_bytes / estimate_bytes ({peak / estimate:g})"
        )
    window = mem.get("window_peak_bytes")
    if _finite(peak) and _finite(window) and window > peak:
        raise InvalidField(f"result.memory.window_peak_bytes: {window} is above the run's peak_bytes {peak}")


def implied_flags(result: dict) -> list[str]:
    """The result's flags, with every flag its own figures imply added, by the engine's rules
    (engine/measured.py): a bundle cannot drop a warning its numbers call for. A flag the bundle
    carries is kept: the measuring machine knew what a bundle does not (--share-device, the load)."""
    carried = list(result.get("flags") or [])
    flags = set(carried)
    peak, achieved, mfu = result.get("peak_tflops"), result.get("achieved_tflops"), result.get("mfu")
    margin = peaks.CPU_SOFT_MARGIN if result.get("peak_source") in ("measured", peaks.PROVISIONAL) else 1.0
    if (_finite(achieved) and _finite(peak) and stats.above_peak(achieved, peak, margin)) or (
        _finite(mfu) and mfu > margin
    ):
        flags.add(stats.FLAG_ABOVE_PEAK)
    losses = result.get("losses") or []
    if stats.non_finite(losses):
        flags.add(stats.FLAG_NON_FINITE_LOSS)
    if stats.loss_not_falling(losses):
        flags.add(stats.FLAG_LOSS_NOT_FALLING)
    placement = result.get("placement") or {}
    placed = list(placement.get("variables") or []) + list(placement.get("ops") or [])
    if placed and result.get("device") in ("cpu", "gpu", "tpu") and stats.placement_mismatch(result["device"], placed):
        flags.add(stats.FLAG_PLACEMENT_MISMATCH)
    repeats = result.get("repeats")
    cv = result.get("repeat_cv")
    if isinstance(repeats, list) and len(repeats) > 1 and all(_finite(r) for r in repeats):
        cv = stats.repeat_spread(repeats)[1]
    if _finite(cv) and cv > stats.UNSTABLE_CV:
        flags.add(stats.FLAG_UNSTABLE)
    return carried + [flag for flag in stats.FLAGS if flag in flags and flag not in carried]


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def clipped_error(error: str | None) -> str | None:
    """A run's error as the store keeps it: past MAX_ERROR_CHARS, its start and a marker of the cut, within
    MAX_ERROR_CHARS in all (so that an export of it imports again)."""
    if error is None or len(error) <= MAX_ERROR_CHARS:
        return error
    marker = f" … [error cut: {len(error)} characters, only the first part kept]"
    return error[: MAX_ERROR_CHARS - len(marker)] + marker


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
