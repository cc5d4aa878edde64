"""The store's runs as calibration points and as the measured figures a prediction sits beside.

Finished runs count: their median step time is the measurement, their step's profile (result JSON,
key "profile"; for older runs, the result's FLOP count) the work. A run's accelerator is matched
to the hardware catalog by name (a family name takes the catalog's default variant); a CPU run stands on its host's probed peak (the median of the probes its runs recorded)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Optional

from dashbench.predict.calibration import Point
from dashbench.predict.roofline import RUN_PRECISIONS, FormulaStep

# Runs read per question: the newest ones; a store of a million runs is not scanned whole.
SCAN = 500
# Two profiles describe the same step when their FLOPs agree this closely (same workload, shape, batch).
SAME_STEP = 0.01


@dataclass(frozen=True)
class HostCPU:
    """A CPU as the roofline reads a chip: its peak is what the run's probe measured."""

    name: str
    peaks: dict
    memory_bw_gbs: Optional[float] = None
    link_gbs: Optional[float] = None
    family: str = "CPU"
    kind: str = "cpu"
    extra: dict = field(default_factory=dict)


def chip_for(accelerator: str, peak_tflops: Optional[float] = None, precision: str = "fp32"):
    """The catalog's chip for a run's accelerator, a HostCPU for a CPU run, or None."""
    from dashbench.hardware import catalog

    if str(accelerator).upper() == "CPU":
        if not peak_tflops or not math.isfinite(peak_tflops):
            return None
        return HostCPU("CPU", {precision: float(peak_tflops), "fp32": float(peak_tflops)})
    resolve = getattr(catalog, "resolve", None)  # a run's device name ("NVIDIA H100 80GB HBM3") to its row
    if resolve is not None:
        return resolve(accelerator)
    try:
        return catalog.get(accelerator)
    except LookupError:
        return None


def runs_with_profiles(store, model: Optional[str] = None) -> list[dict]:
    """Finished runs (newest first, at most SCAN) with their result's profile and accuracy."""
    filters = {"status": "done", "limit": SCAN}
    if model:
        filters["model"] = model
    frame = store.runs(**filters)
    out = []
    for row in frame.to_dict("records"):
        run = store.get_run(row["run_id"])
        result = run.get("result") if run else None
        data = result.to_dict() if result is not None else {}
        profile = profile_of(data)
        if profile is None:
            continue
        out.append(row | {"profile": profile, "accuracy": data.get("accuracy")})
    return out


def profile_of(result: dict):
    """A result's step profile; for a run stored before results carried one, its FLOPs (the
    compiler's count first, as a profile's) over its measured step, with no bytes."""
    if isinstance(result.get("profile"), dict):
        from dashbench.workloads.profile import StepProfile

        try:
            return StepProfile.from_dict(result["profile"])
        except (TypeError, ValueError, KeyError):
            return None
    per_example = result.get("compiler_flops_per_example") or result.get("flops_per_example")
    eps, step = result.get("examples_per_sec"), result.get("step_time_median_s")
    batch = result.get("global_batch_size")
    if not (per_example and eps and step and batch):
        return None
    work = round(eps * step)  # examples (or an LM's tokens) in one step
    tokens = work // batch if result.get("unit") == "tokens" and batch else None
    return FormulaStep(
        model=str(result.get("model")),
        batch_size=int(batch),
        precision=RUN_PRECISIONS.get(result.get("precision"), result.get("precision") or "fp32"),
        flops=per_example * work,
        params=0,
        grad_bytes=0.0,
        unit="tokens" if tokens else "examples",
        tokens_per_example=tokens,
        flops_source="result",
    )


def points(runs: list[dict]) -> list[Point]:
    """Throughput runs as calibration points (a to-accuracy run's steps include evaluation)."""
    out = []
    host_peaks = _host_peaks(runs)
    for run in runs:
        step = run.get("step_time_median_s")
        if run.get("accuracy") or step is None or not math.isfinite(step) or step <= 0:
            continue
        prec = run["profile"].precision
        peak = host_peaks.get(run.get("host"), run.get("peak_tflops"))
        chip = chip_for(run.get("accelerator") or "", peak, prec)
        if chip is None:
            continue
        chips = int(run["accelerator_count"]) if _number(run.get("accelerator_count")) else 1
        key = f"run:{run['run_id']}"
        out.append(Point(key, run["profile"], chip, chips, prec, float(step), "measured", f"run {run['run_id']}"))
    return out


def _host_peaks(runs: list[dict]) -> dict:
    """Each host's CPU peak: the median of its CPU runs' probes. One probe taken under a burst of
    load reads low, and would move that run's efficiency by as much."""
    by_host: dict = {}
    for run in runs:
        peak = run.get("peak_tflops")
        if str(run.get("accelerator")).upper() == "CPU" and _number(peak) and peak > 0:
            by_host.setdefault(run.get("host"), []).append(float(peak))
    return {host: statistics.median(peaks) for host, peaks in by_host.items()}


def same_step(a, b) -> bool:
    return (
        a.model == b.model
        and a.batch_size == b.batch_size
        and a.precision == b.precision
        and math.isclose(a.flops, b.flops, rel_tol=SAME_STEP)
    )


def measured_for(points_: list[Point], profile, chip, chips: int) -> list[Point]:
    """The measured points of this very step on this device and chip count."""
    return [
        p
        for p in points_
        if p.origin == "measured" and p.chip.name == chip.name and p.chips == chips and same_step(p.profile, profile)
    ]


def steps_to_target(runs: list[dict], profile) -> Optional[dict]:
    """The newest to-accuracy run of this step that reached its target: its median steps to target."""
    for run in runs:
        acc = run.get("accuracy") or {}
        if not same_step(run["profile"], profile):
            continue
        steps = [r["steps_to_target"] for r in acc.get("runs", []) if r.get("reached") and r.get("steps_to_target")]
        if steps:
            metric = acc.get("metric", "val_accuracy")
            return {
                "run_id": run["run_id"],
                "steps": statistics.median(steps),
                "target": acc.get("target"),
                "metric": metric,
            }
    return None


def _number(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))
