"""Two loops timed side by side on a shared machine: per-round ratios, their spread, and the load.

The bench runs the engine's host loops with another loop's chunk of the same steps between each
two of them (E H E H E ...). Each chunk is held against the mean of the engine loops just before
and just after it, so a load that rises or falls steadily over a round hits both sides alike, and
neither side always runs first. The figure is the median of those per-round ratios, with the
interquartile range (how much rounds differ) and a bootstrap 95% interval of the median (how
sure that median is); a sum over rounds would let a few loaded rounds decide it.
"""

from __future__ import annotations

import os
import random
import statistics

BOOTSTRAP_RESAMPLES = 2000
GOAL = 0.98  # the engine's throughput may trail the hand loop's by at most 2%
METHOD = (
    "Each round's ratio is the engine's throughput over the other loop's, that loop's chunk held against the "
    "mean of the engine loops just before and just after it (above 1: the engine is faster); the figure is "
    "the median of the rounds' ratios, with their interquartile range and a bootstrap 95% interval of the "
    "median, by wall-clock and by process CPU time (all threads). Compilation and warm-up are excluded."
)


def bracketed_ratios(engine: list[float], other: list[float]) -> list[float]:
    """Engine throughput / other loop's throughput, one per round: other[i] ran after engine[i] and
    before engine[i + 1], so its seconds are held against their mean (> 1: the engine is faster).
    A last chunk with no engine loop after it is left out."""
    return [other[i] / ((engine[i] + engine[i + 1]) / 2) for i in range(min(len(other), len(engine) - 1))]


def spread(ratios: list[float], seed: int = 0) -> dict:
    """Median, quartiles and a seeded bootstrap 95% interval of the median of `ratios`."""
    if not ratios:
        raise ValueError("no rounds to summarise: measure at least two engine loops")
    if len(ratios) == 1:
        q1 = q3 = ratios[0]
    else:
        q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    draw = random.Random(seed)
    medians = sorted(statistics.median(draw.choices(ratios, k=len(ratios))) for _ in range(BOOTSTRAP_RESAMPLES))
    return {
        "median": statistics.median(ratios),
        "q1": q1,
        "q3": q3,
        "rounds": len(ratios),
        "ci_low": medians[int(0.025 * BOOTSTRAP_RESAMPLES)],
        "ci_high": medians[int(0.975 * BOOTSTRAP_RESAMPLES) - 1],
    }


def compare(engine: dict, other: dict) -> dict:
    """`engine`, `other`: {"wall": [...], "cpu": [...]} seconds per round. The spread of the
    bracketed ratios by wall-clock time and by process CPU time (all threads)."""
    return {clock: spread(bracketed_ratios(engine[clock], other[clock])) for clock in ("wall", "cpu")}


def load_now() -> dict:
    """The machine's load average (1 / 5 / 15 min) and its CPU count, for before and after."""
    return {"loadavg": list(os.getloadavg()), "cpus": os.cpu_count() or 1}


def render_spread(s: dict) -> str:
    """`1.003 [0.99–1.01] (CI 0.995–1.008)`: the median, its IQR, and its bootstrap interval."""
    return f"{s['median']:.3f} [{s['q1']:.3f}–{s['q3']:.3f}] (CI {_end(s['ci_low'])}–{_end(s['ci_high'])})"


def verdict(ratios: dict) -> str:
    """The goal, judged on each clock by the median's 95% interval: met when the whole interval is at
    or above it, missed when the whole interval is below it, and otherwise not settled by these rounds."""
    parts = []
    for clock, label in (("wall", "wall"), ("cpu", "CPU")):
        s = ratios[clock]
        interval = f"{_end(s['ci_low'])}–{_end(s['ci_high'])}"
        if s["ci_low"] >= GOAL:
            parts.append(f"meets the {GOAL} goal by {label} time (median {s['median']:.3f}, 95% interval {interval})")
        elif s["ci_high"] < GOAL:
            parts.append(
                f"is BELOW the {GOAL} goal by {label} time (median {s['median']:.3f}, 95% interval {interval})"
            )
        else:
            parts.append(
                f"is not settled against the {GOAL} goal by {label} time: median {s['median']:.3f}, "
                f"its 95% interval {interval} spans {GOAL}"
            )
    return "; ".join(parts)


def _end(value: float) -> str:
    """An interval's end to 3 decimals, or 4 where 3 would round it onto the goal it misses or meets."""
    text = f"{value:.3f}"
    return f"{value:.4f}" if text == f"{GOAL:.3f}" and value != GOAL else text


def render_load(before: dict, after: dict, one_minute: list[float], short: bool = False) -> str:
    """`load average (1/5/15 min) 1.20 / 0.90 / 0.80 → 1.50 / 1.00 / 0.80 (1-min, over the rounds:
    1.10–1.60) on 2 CPUs`; `short`: `1.20 / 0.90 / 0.80 → 1.50 / 1.00 / 0.80 (1.10–1.60)`, for a table cell."""
    fmt = lambda values: " / ".join(f"{v:.2f}" for v in values)
    span = f"{min(one_minute):.2f}–{max(one_minute):.2f}" if one_minute else ""
    if short:
        return f"{fmt(before['loadavg'])} → {fmt(after['loadavg'])}" + (f" ({span})" if span else "")
    during = f" (1-min, over the rounds: {span})" if span else ""
    return (
        f"load average (1/5/15 min) {fmt(before['loadavg'])} → {fmt(after['loadavg'])}{during} on {before['cpus']} CPUs"
    )
