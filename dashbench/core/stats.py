"""Step-time statistics, throughput and its confidence interval, MFU and plausibility flags.

Plain numbers in, plain numbers out: no TensorFlow, so the store and the dashboard can reuse it.
A sample is one host loop: `steps` training steps that took `duration_s` (timed after a host sync).
"""

from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence

import numpy as np

FLAG_ABOVE_PEAK = "above_peak"
FLAG_NON_FINITE_LOSS = "non_finite_loss"
FLAG_LOSS_NOT_FALLING = "loss_not_falling"
FLAG_PLACEMENT_MISMATCH = "placement_mismatch"
FLAG_DEVICE_SHARED = "device_shared"  # measured with --share-device beside another run on the device
FLAG_CONTENDED = "contended"  # other processes used more than CONTENDED_SHARE of the cores while it measured
FLAG_UNSTABLE = "unstable"  # the repeats' throughputs spread more than UNSTABLE_CV
FLAG_STORE_OUTAGE = "store_outage"  # the store was unreachable for a while: the run's writes waited (figures unchanged)
FLAG_SKEWED = "skewed"  # the throughput from total time and from the median step differ by more than SKEW_SHARE
FLAGS = (
    FLAG_ABOVE_PEAK,
    FLAG_NON_FINITE_LOSS,
    FLAG_LOSS_NOT_FALLING,
    FLAG_PLACEMENT_MISMATCH,
    FLAG_DEVICE_SHARED,
    FLAG_CONTENDED,
    FLAG_UNSTABLE,
    FLAG_STORE_OUTAGE,
    FLAG_SKEWED,
)
CONTENDED_SHARE = 0.25
UNSTABLE_CV = 0.05
SKEW_SHARE = 0.20

# Two-sided 95% Student-t quantiles by degrees of freedom; beyond the table the normal 1.96 is close.
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    25: 2.060,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}


def t95(dof: int) -> float:
    if dof < 1:
        raise ValueError("a confidence interval needs at least two samples")
    known = [d for d in sorted(_T95) if d <= dof]
    return _T95[known[-1]] if dof <= 120 else 1.96


def step_time_stats(samples: Sequence[dict], global_batch_size: int) -> dict:
    """Throughput and step-time statistics of measured samples (dicts with `steps`, `duration_s`).

    Throughput is total examples over total measured time (not a mean of rates). Its 95% interval
    comes from a t-interval on the per-sample mean step time, mapped through batch / step time.
    """
    if not samples:
        raise ValueError("no measured samples")
    steps = np.array([s["steps"] for s in samples], dtype=float)
    durations = np.array([s["duration_s"] for s in samples], dtype=float)
    per_step = durations / steps
    total_steps = float(steps.sum())
    examples_per_sec = global_batch_size * total_steps / float(durations.sum())
    result = {
        "examples_per_sec": examples_per_sec,
        "examples_per_sec_ci95": [None, None],
        "step_time_median_s": float(np.median(per_step)),
        "step_time_p10_s": float(np.percentile(per_step, 10)),
        "step_time_p90_s": float(np.percentile(per_step, 90)),
        "step_time_std_s": float(per_step.std(ddof=1)) if len(per_step) > 1 else 0.0,
        "samples": len(samples),
    }
    if len(per_step) > 1:
        mean = float(per_step.mean())
        half = t95(len(per_step) - 1) * result["step_time_std_s"] / math.sqrt(len(per_step))
        hi = global_batch_size / (mean - half) if mean > half else None  # None: unbounded above
        result["examples_per_sec_ci95"] = [global_batch_size / (mean + half), hi]
    return result


def median_step_rate(items_per_step, step_time_median_s) -> Optional[float]:
    """Throughput from the median step: the batch's examples (or tokens) over the median step time.
    The headline (step_time_stats) is total examples over total time; a run with a slow tail of steps
    reads lower there than here."""
    if not items_per_step or not step_time_median_s or not math.isfinite(step_time_median_s):
        return None
    return items_per_step / step_time_median_s


def skew(headline: Optional[float], median_rate: Optional[float]) -> Optional[float]:
    """How far the median step's throughput is from the headline's, as a fraction of the headline."""
    if not headline or median_rate is None or not math.isfinite(headline):
        return None
    return median_rate / headline - 1.0


def skewed(headline: Optional[float], median_rate: Optional[float]) -> bool:
    found = skew(headline, median_rate)
    return found is not None and abs(found) > SKEW_SHARE


def examples_per_item(unit: str, seq_len) -> int:
    """Examples in one item of a batch: an LM's unit is the token, so a sequence holds seq_len of them."""
    return int(seq_len) if unit == "tokens" else 1


def mfu_flops(flops: dict) -> tuple[Optional[float], Optional[str]]:
    """(training FLOPs per example that MFU uses, where they came from): the analytic count where
    there is one (MaxText's convention), else the compiler's; (None, None) with neither."""
    if flops.get("training"):
        return flops["training"], "analytic"
    if flops.get("compiler"):
        return flops["compiler"], "compiler"
    return None, None


def flops_source_text(source: Optional[str], counted, compiler) -> str:
    """' (analytic; the compiler counts 0.95× it)', ' (the compiler's count of one step: …)', or ''."""
    if source == "analytic" and compiler and counted and math.isfinite(compiler) and math.isfinite(counted):
        return f" (analytic; the compiler counts {compiler / counted:.2f}× it)"
    if source == "compiler":
        return " (the compiler's count of one step: no formula for this model)"
    return f" ({source})" if source else ""


def achieved_tflops(flops_per_example: Optional[float], examples_per_sec: float) -> Optional[float]:
    if not flops_per_example:
        return None
    return flops_per_example * examples_per_sec / 1e12


def mfu(achieved: Optional[float], peak: Optional[float]) -> Optional[float]:
    if achieved is None or not peak:
        return None
    return achieved / peak


def above_peak(achieved: Optional[float], peak: Optional[float], margin: float = 1.0) -> bool:
    """A datasheet peak is a hard limit (margin 1); a measured one is soft (margin > 1)."""
    return achieved is not None and bool(peak) and achieved > peak * margin


def non_finite(losses: Iterable[Optional[float]]) -> bool:
    return any(value is None or not math.isfinite(value) for value in losses)


def loss_not_falling(losses: Sequence[Optional[float]]) -> bool:
    """True when the last quarter of the loss curve is not below its first quarter.

    Quarters rather than first/last points, so one noisy loop does not decide. Fewer than two
    finite points say nothing either way.
    """
    finite = [v for v in losses if v is not None and math.isfinite(v)]
    if len(finite) < 2:
        return False
    quarter = max(1, len(finite) // 4)
    return float(np.mean(finite[-quarter:])) >= float(np.mean(finite[:quarter]))


def placement_mismatch(kind: str, device_strings: Iterable[str]) -> bool:
    """True when a variable or op sits on another kind of device than the run asked for.

    The seed's lesson: switching the runtime to TPU changed nothing, the ops still ran on the CPU.
    """
    wanted = {"cpu": "CPU", "gpu": "GPU", "tpu": "TPU"}[kind]
    found = [d for d in device_strings if d]
    return not found or any(_device_type(d) != wanted for d in found)


def _device_type(device: str) -> str:
    # "/job:localhost/replica:0/task:0/device:GPU:1" → "GPU"
    tail = device.rsplit("device:", 1)[-1] if "device:" in device else device.rsplit("/", 1)[-1]
    kind = tail.split(":")[0].upper()
    return "TPU" if kind.startswith("TPU") else kind  # TPU_REPLICATED_CORE is a TPU too


def finite_or_none(value: Optional[float]) -> Optional[float]:
    """Strict JSON has no NaN or inf: a non-finite number is stored as null (the flag says why)."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def ci95_text(ci) -> str:
    """'95% CI lo–hi', or the lower end in words when the interval is unbounded above (few, noisy
    samples: the step-time interval reaches zero); '' without a lower bound."""
    lo, hi = (list(ci or []) + [None, None])[:2]
    if not _finite_number(lo):
        return ""
    if _finite_number(hi):
        return f"95% CI {lo:,.1f}–{hi:,.1f}"
    return f"95% CI at least {lo:,.1f}, no upper end: too few or too noisy samples"


def _finite_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def repeat_spread(throughputs: Sequence[float]) -> tuple[float, float]:
    """(median, coefficient of variation) of the repeats' throughputs; CV 0 for a single repeat."""
    values = np.array(throughputs, dtype=float)
    cv = float(values.std(ddof=1) / values.mean()) if len(values) > 1 and values.mean() > 0 else 0.0
    return float(np.median(values)), cv


def contended(other_cores: Optional[float], cores: Optional[int]) -> bool:
    """Other processes kept more than CONTENDED_SHARE of the machine's cores busy while the run measured."""
    return other_cores is not None and bool(cores) and other_cores > CONTENDED_SHARE * cores
