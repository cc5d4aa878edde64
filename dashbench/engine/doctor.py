"""`dashbench doctor`: does this machine's figures deserve trust? One backend per process (Keras picks
its backend once), every device kind that backend sees here:

- a matmul probe per precision, beside the datasheet peak that MFU and the above-peak flag use: a
  probe above the datasheet means the table is wrong for this device (an error), one far below it
  (under FAR_BELOW of it) a throttled, shared or misidentified device (a warning). A CPU has no
  datasheet: its probe is the calibration that runs on this host use as their peak;
- a stopwatch cross-check: the wall time of a run of 3N steps minus that of a run of N steps, over
  2N, against the step time the engine reports (STOPWATCH_TOLERANCE), which catches a timer that
  stops before the device is done. Each run's wall time is taken from the engine's own events, from
  the start of the measured phase to the last sample, so setup and compile time stay out of it;
- placement: the tiny runs land their variables and ops on the device asked for.

A CPU is calibrated only on a quiet machine: the doctor first watches the host for QUIET_WINDOW_S
(engine.hostload) and, when other processes keep more than stats.CONTENDED_SHARE of the cores busy,
refuses, in one line that says what to do — a peak probed under load is low, and every later run's
MFU would be divided by it. Its probe is the one every backend's CPU runs use (probe.cpu_matmul_tflops,
numpy's BLAS in float32), so the host has one CPU peak whatever the backend or precision.

`check(backend)` is what the child process runs; `verdict(report)` judges one device's report and
needs no framework. No store here: the command (dashbench.cli.doctor_cmd) stores the verdicts.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import Optional

from dashbench.core import stats
from dashbench.core.spec import RunSpec
from dashbench.engine import hostload, probe
from dashbench.engine.probe import matmul_tflops
from dashbench.hardware import peaks

# The wall-clock step time must match the engine's within this fraction.
STOPWATCH_TOLERANCE = 0.03
# A probe under this fraction of the datasheet peak is a warning (throttled, shared or misidentified).
FAR_BELOW = 0.25
# Probe dtypes and the run precision whose datasheet column each is checked against.
PROBE_PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
# Accelerators need bigger products than a CPU to reach their rate.
ACCEL_PROBE_SIZE = int(os.environ.get("DASHBENCH_ACCEL_PROBE_SIZE", "8192"))
PROBE_REPEATS = 5
# What a CPU's bfloat16 and float16 rows say: one probe serves every precision there.
CPU_ONE_PEAK = "the float32 BLAS probe is this CPU's peak for every precision"
# The stopwatch's tiny run (the Colab article's conv2d, small) and its step counts: N and 3N measured steps.
STOPWATCH_SPEC = dict(model="conv2d", batch_size=16, image_size=64, width=16, warmup=3, steps_per_loop=1)
STOPWATCH_STEPS = int(os.environ.get("DASHBENCH_DOCTOR_STEPS", "30"))
STOPWATCH_TRIES = int(os.environ.get("DASHBENCH_DOCTOR_TRIES", "3"))

# How long the doctor watches the host before it calibrates a CPU (engine.hostload's window).
QUIET_WINDOW_S = 2.0

OK, WARNING, ERROR = "ok", "warning", "error"
_RANK = {OK: 0, WARNING: 1, ERROR: 2}


# -- judging (no framework) ----------------------------------------------------------------------


def verdict(report: dict) -> tuple[str, list[str]]:
    """(ok | warning | error, reasons) for one device's report (the shape check() makes)."""
    reasons: list[tuple[str, str]] = []
    if report.get("contended"):  # nothing else was measured: the refusal is the whole verdict
        return WARNING, [refusal(report["contended"])]
    if report.get("error"):
        reasons.append((ERROR, f"the check failed: {report['error']}"))
    for dtype, row in (report.get("probes") or {}).items():
        measured, datasheet = row.get("measured_tflops"), row.get("datasheet_tflops")
        if measured is None or not datasheet:
            continue
        if measured > datasheet:
            reasons.append(
                (
                    ERROR,
                    f"{dtype} matmul reaches {measured:.3g} TFLOP/s, above the datasheet peak "
                    f"{datasheet:.3g} used for MFU: the peak table is wrong for this device",
                )
            )
        elif measured < FAR_BELOW * datasheet:
            reasons.append(
                (
                    WARNING,
                    f"{dtype} matmul reaches only {measured:.3g} TFLOP/s, under "
                    f"{FAR_BELOW:.0%} of the datasheet peak {datasheet:.3g} (throttled, shared "
                    "or misidentified device?)",
                )
            )
    stopwatch = report.get("stopwatch") or {}
    ratio = stopwatch.get("ratio")
    if stopwatch.get("error"):
        reasons.append((ERROR, f"stopwatch check failed: {stopwatch['error']}"))
    elif ratio is None:
        # A loaded machine can leave the pairs of runs nothing to compare: unchecked, not wrong.
        why = stopwatch.get("why") or "no pair of runs gave a ratio"
        reasons.append(
            (
                WARNING,
                f"stopwatch: could not time the engine's steps ({why}); the step times are "
                "unchecked here: run doctor again on a quieter machine",
            )
        )
    elif abs(ratio - 1.0) > STOPWATCH_TOLERANCE:
        reasons.append(
            (
                ERROR,
                f"wall-clock step time is {ratio:.3f}× the step time the engine reports "
                f"(allowed: within {STOPWATCH_TOLERANCE:.0%})",
            )
        )
    placement = report.get("placement") or {}
    if placement.get("mismatch"):
        reasons.append(
            (
                ERROR,
                f"a {report.get('device')} run placed work elsewhere: "
                f"{', '.join(placement.get('devices') or []) or 'nowhere recorded'}",
            )
        )
    level = max((level for level, _ in reasons), key=_RANK.__getitem__, default=OK)
    return level, [text for _, text in reasons]


def refusal(load: dict) -> str:
    """The one line a contended CPU check says instead of calibrating."""
    return (
        f"not calibrated: other processes kept {load.get('other_cores', 0):.1f} of {load.get('cores')} cores busy "
        f"(over {stats.CONTENDED_SHARE:.0%}), so the CPU peak would read low; run `dashbench doctor` again "
        "when the machine is quiet (or add --busy-ok to store that low peak anyway)"
    )


def cpu_contention(read=hostload.reading, window_s: float = QUIET_WINDOW_S, sleep=time.sleep) -> Optional[dict]:
    """The host's load while this process waits `window_s`: its record (hostload.Window) when other
    processes kept the machine contended (stats.contended), else None. `read`: planted in tests."""
    window = hostload.Window(read=read)
    sleep(window_s)
    record = window.close()
    return record if stats.contended(record.get("other_cores"), record.get("cores")) else None


def stopwatch_ratio(
    wall_short: float, wall_long: float, steps_short: int, steps_long: int, engine_step_s: float
) -> Optional[float]:
    """(wall(3N) − wall(N)) / 2N over the engine's step time; None when it cannot be formed."""
    if (
        not all(_finite(v) for v in (wall_short, wall_long, engine_step_s))
        or engine_step_s <= 0
        or steps_long <= steps_short
    ):
        return None
    return (wall_long - wall_short) / (steps_long - steps_short) / engine_step_s


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# -- measuring (in the child process: one backend) -----------------------------------------------


def device_kinds(backend: str) -> list[str]:
    """The device kinds `backend` sees here: the CPU always, then a GPU or a TPU where present."""
    from dashbench.engine import backends

    return backends.get(backend).device_kinds()


def check(
    backend: str,
    kinds: Optional[list[str]] = None,
    steps: int = STOPWATCH_STEPS,
    tries: int = STOPWATCH_TRIES,
    busy_ok: bool = False,
    read=hostload.reading,
) -> dict:
    """Every device kind's report for `backend`, measured in this process. A CPU on a contended host
    (cpu_contention, unless `busy_ok`) is not measured: its report says why (verdict's refusal)."""
    from dashbench.engine import backends

    backends.select(backend)
    reports = []
    versions = _versions(backend)
    for kind in kinds or device_kinds(backend):
        report = {"backend": backend, "device": kind, "versions": versions}
        busy = None if kind != "cpu" or busy_ok else cpu_contention(read)
        try:
            if busy:
                report.update(accelerator="CPU", probes={}, contended=busy)
            else:
                report.update(_check_device(backend, kind, steps, tries))
        except Exception as exc:  # one device's failure is its verdict, not the end of the check
            report["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        report["verdict"], report["reasons"] = verdict(report)
        reports.append(report)
    return {"backend": backend, "versions": versions, "devices": reports}


def _versions(backend: str) -> dict:
    from dashbench import __version__
    from dashbench.engine import backends

    versions = {"dashbench": __version__, **backends.get(backend).versions()}
    import keras

    versions["keras"] = keras.__version__
    return versions


def _check_device(backend: str, kind: str, steps: int, tries: int) -> dict:
    stopwatch, result = stopwatch_check(backend, kind, steps, tries)
    accelerator = result.accelerator if result is not None else kind.upper()
    tf32 = bool(result.env.get("tf32")) if result is not None else False
    probes = {}
    for dtype, precision in PROBE_PRECISIONS.items():
        probe_ = {"precision": precision}
        try:
            size = _probe_size(kind)
            if kind == "cpu" and dtype != probe.CPU_PROBE_DTYPE:
                probe_["measured_tflops"], probe_["note"] = None, CPU_ONE_PEAK
            elif kind == "cpu":
                probe_["measured_tflops"] = probe.cpu_matmul_tflops(size, PROBE_REPEATS)
                probe_["size"], probe_["library"] = size, probe.CPU_PROBE
            else:
                probe_["measured_tflops"] = matmul_tflops(backend, kind, dtype, size, PROBE_REPEATS)
                probe_["size"] = size
        except Exception as exc:  # a dtype this device or backend cannot multiply
            probe_["measured_tflops"] = None
            probe_["unsupported"] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:200]}"
        datasheet = None if kind == "cpu" else peaks.datasheet_peak_tflops(accelerator, precision, tf32)
        if kind == "cpu":  # no datasheet figure for a CPU, unless the peak table has one (a planted test row)
            datasheet = peaks.datasheet_peak_tflops("CPU", precision, False)
        probe_["datasheet_tflops"] = datasheet
        probes[dtype] = probe_
    placement = {}
    if result is not None:
        placement = {
            "devices": sorted(set(result.placement.get("variables", []) + result.placement.get("ops", []))),
            "mismatch": stats.FLAG_PLACEMENT_MISMATCH in result.flags,
        }
    return {"accelerator": accelerator, "probes": probes, "stopwatch": stopwatch, "placement": placement}


def _probe_size(kind: str) -> int:
    if kind == "cpu":
        from dashbench.engine import frameworks

        return frameworks.CPU_PROBE_SIZE
    return ACCEL_PROBE_SIZE


def stopwatch_check(backend: str, kind: str, steps: int, tries: int, shape: Optional[dict] = None):
    """The median ratio over `tries` pairs of runs (N, 3N steps) of `shape` (RunSpec fields; the
    doctor's tiny conv2d by default), and the last run's result. Each pair also keeps the step time
    the longer run reports as its median, the one the card shows beside the headline."""
    from dashbench.engine import loop

    ratios, pairs, result = [], [], None
    for _ in range(max(1, tries)):
        walls = {}
        for n in (steps, 3 * steps):
            spec = RunSpec(device=kind, backend=backend, steps=n, **(shape or STOPWATCH_SPEC))
            marks = {}

            def on_event(event, marks=marks):
                if event.get("event") == "phase" and event.get("phase") == "measure":
                    marks["start"] = time.perf_counter()
                elif event.get("event") == "sample" and not event.get("warmup"):
                    marks["end"] = time.perf_counter()

            result = loop.run(spec, on_event)
            walls[n] = (marks["end"] - marks["start"], result)
        short, long_ = walls[steps], walls[3 * steps]
        # The engine's step time over the same 2N steps, from what each run reports: its measured
        # time is steps × batch / examples_per_sec. A loaded machine slows both clocks alike.
        measured = _measured_s(short[1]), _measured_s(long_[1])
        engine_step = None if None in measured else (measured[1] - measured[0]) / (2 * steps)
        ratio = stopwatch_ratio(short[0], long_[0], steps, 3 * steps, engine_step)
        ratios.append(ratio)
        pairs.append(
            {
                "wall_short_s": short[0],
                "wall_long_s": long_[0],
                "engine_step_s": engine_step,
                "median_step_s": getattr(long_[1], "step_time_median_s", None),
                "ratio": ratio,
            }
        )
    finite = [r for r in ratios if r is not None]
    found = {
        "ratio": statistics.median(finite) if finite else None,
        "steps": [steps, 3 * steps],
        "tolerance": STOPWATCH_TOLERANCE,
        "tries": pairs,
    }
    if not finite:
        found["why"] = _why_untimed(pairs, steps)
    return found, result


def _measured_s(result) -> Optional[float]:
    """The measured time a result reports: its steps at its throughput; None without a throughput.
    An LM's throughput counts tokens, so its batch holds seq_len of them per sequence."""
    rate = result.examples_per_sec
    if not _finite(rate) or rate <= 0:
        return None
    shapes = getattr(result, "shapes", None) or {}
    per_item = stats.examples_per_item(getattr(result, "unit", "examples"), shapes.get("seq_len"))
    return result.steps * result.global_batch_size * per_item / rate


def _why_untimed(pairs: list[dict], steps: int) -> str:
    """Why no pair of runs gave a ratio, in the words of the last pair."""
    last = pairs[-1]
    tries = f"{len(pairs)} tr{'y' if len(pairs) == 1 else 'ies'}"
    if last["engine_step_s"] is None:
        return f"a run reported no throughput, in {tries}"
    return (
        f"the engine's time for {3 * steps} steps was not longer than for {steps}, in {tries}: "
        "the machine's load changed between the runs"
    )
