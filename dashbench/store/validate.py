"""What an imported run may hold: every field checked against what the engine and the store write,
so that a run accepted from a bundle can always be read back by `list`, Compare and Results.

Each check raises InvalidField, whose text is "field: why" on one line. No TensorFlow here.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any

from dashbench.result import RunResult
from dashbench.spec import BACKENDS, MAX_SAMPLES, RunSpec, SpecError

# SQLite's INTEGER is 64-bit signed: a larger int cannot be stored at all.
INT_LIMIT = 2**63
PID_LIMIT = 2**32
# A run's error is a message, not a log: the store keeps at most this much of it (clipped_error), and an
# import refuses more.
MAX_ERROR_CHARS = 10_000
EARLIEST = _dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc)
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}")
TEXT_LIMIT = 1000  # host, label, sweep id: a line, not a document
_SPEC_TEXT = ("label", "data_path", "tpu")


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
    for name in _SPEC_TEXT:
        text(f"spec: {name}", out[name])
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
    run_id = run.get("run_id")
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise InvalidField(f"run_id: must be 1-128 letters, digits or ._:+- (starting with a letter or digit), "
                           f"got {_short(run_id)}")
    whole("pid", run.get("pid"), high=PID_LIMIT, null=True)
    for name in ("host", "label", "sweep_id"):
        text(name, run.get(name))
    text("error", run.get("error"), limit=MAX_ERROR_CHARS)


def check_result(result: Any) -> None:
    if result is not None:
        try:
            RunResult.check(result)
        except ValueError as exc:
            raise InvalidField(f"result.{exc}") from None
        backend = result.get("backend")
        if backend is not None and backend not in BACKENDS:
            # A filter column: a name no dashbench writes would be a filter value nothing can choose.
            raise InvalidField(f"result.backend: unknown backend {_short(backend)}; choose one of: "
                               f"{', '.join(BACKENDS)} (or leave it out: tensorflow)")
        text("result.backend_version", result.get("backend_version"), limit=100)
        losses = result.get("losses")
        if isinstance(losses, list) and len(losses) > MAX_SAMPLES:
            raise InvalidField(f"result.losses: {len(losses)} losses; a run holds at most {MAX_SAMPLES} "
                               f"(one per host loop)")


def clipped_error(error: str | None) -> str | None:
    """A run's error as the store keeps it: past MAX_ERROR_CHARS, its start and a marker of the cut, within
    MAX_ERROR_CHARS in all (so that an export of it imports again)."""
    if error is None or len(error) <= MAX_ERROR_CHARS:
        return error
    marker = f" … [error cut: {len(error)} characters, only the first part kept]"
    return error[:MAX_ERROR_CHARS - len(marker)] + marker


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
