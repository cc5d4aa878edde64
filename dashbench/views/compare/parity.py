"""Convergence parity: does one setup train alike on every device and backend?

Where the same setup (compare.to_target.setup_key) and seed has runs on more than one device (an
accelerator, its count and replicas, and the backend: compare.to_target.device_key), their curves are
compared point by point at the same training step:
- a throughput run: its loss per host loop (RunResult.losses, warm-up included), at step
  (i + 1) × steps_per_loop; only the loss (on synthetic data there is nothing else);
- a to-accuracy run: each seed's curve, its train loss and its validation accuracy per evaluation
  (a loss target's run, an LM's: its validation loss instead).

The rule (derived in docs/CONVERGENCE.md, "Convergence parity"):
1. The reference device is the one with the most seeds of the setup (ties: the first chosen). It
   needs two seeds or more: the tolerance is made of their spread. With one, nothing is judged and
   the note says so.
2. sigma = the root mean square, over every pair of the reference's seeds and every step both have,
   of their difference: how far two trainings of this setup that differ only in the seed are apart.
   For a validation accuracy, sigma is at least the binomial noise of the difference of two
   accuracies measured on n held-out examples, sqrt(2 p (1 - p) / n) at the reference's accuracy p.
3. A run departs at a step when it is more than TOLERANCE_SIGMAS × sigma from the reference's run
   of the same seed there (a missing or non-finite value where the reference has one departs too),
   and is flagged when it departs at PERSISTENT_POINTS consecutive steps (one noisy step, e.g. a
   dropout draw, is not a departure), or at its only common step. The flag names the run it departs
   from and the first step (and epoch) of the departure.
Why seed spread and not closeness: TensorFlow and JAX draw different initial weights from one seed
(measured: their losses at one seed differ as much as two seeds do), so a same-seed TensorFlow/JAX
pair is held to how far two seeds are apart, not to equality.
No Streamlit and no TensorFlow here.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Iterable, Optional

from dashbench.core.accuracy import metric_of
from dashbench.views.common.format import is_number
from dashbench.views.common.stored_runs import accuracy_of
from dashbench.views.compare.to_target import device_key, device_text, setup_key

TOLERANCE_SIGMAS = 3.0
PERSISTENT_POINTS = 2
LOSS, TRAIN_LOSS, VAL_ACCURACY, VAL_LOSS = "loss", "train loss", "validation accuracy", "validation loss"


@dataclass
class Series:
    """One seed's curve of one run: {metric: {step: value}} (None: NaN or infinite)."""

    run_id: str
    seed: int
    device: tuple
    setup: tuple
    kind: str  # "loss per host loop" | "evaluation"
    metrics: dict[str, dict[int, Optional[float]]]
    epochs: dict[int, float] = field(default_factory=dict)  # step -> epoch, for evaluations
    validation_examples: Optional[int] = None


@dataclass
class Flag:
    run_id: str
    seed: int
    device: str
    metric: str
    reference_run_id: str
    reference_device: str
    step: int
    epoch: Optional[float]
    value: Optional[float]
    reference_value: Optional[float]
    tolerance: float

    def text(self) -> str:
        """One line: which run departs from which, where, and by how much against the tolerance."""
        from dashbench.results.result import short_id

        where = f"step {self.step}" + (f" (epoch {self.epoch:.3g})" if self.epoch is not None else "")
        value = "not finite" if self.value is None else f"{self.value:.4g}"
        return (
            f"{short_id(self.run_id)} on {self.device} (seed {self.seed}) departs from "
            f"{short_id(self.reference_run_id)} on {self.reference_device} in {self.metric} from {where}: "
            f"{value} against {self.reference_value:.4g}, more than the tolerance ±{self.tolerance:.3g} "
            f"({TOLERANCE_SIGMAS:g}× the reference's seed-to-seed spread)"
        )


@dataclass
class Verdict:
    """One setup's comparison: the reference, what was compared, what departs, and notes."""

    setup: tuple
    kind: str
    reference: str  # device text
    compared: list[str]  # "#abc123 seed 0 on CPU · jax"
    flags: list[Flag]
    note: str = ""


def series_of(run: dict) -> list[Series]:
    """A stored run (Store.get_run's dict, or one with a result dict) as its seeds' curves."""
    result = run.get("result")
    values = result if isinstance(result, dict) else (result.to_dict() if result is not None else {})
    if not values:
        return []
    spec = values.get("spec") or run.get("spec") or {}
    row = {
        **spec,
        **{k: v for k, v in values.items() if v is not None},
        "batch_size": values.get("global_batch_size") or spec.get("batch_size"),
    }
    for name in ("image_size", "seq_len", "width"):
        row[name] = spec.get(name)
    device, setup = device_key(row), setup_key(row)
    block = accuracy_of(values)
    if block is not None:
        out = []
        examples = (block.get("dataset") or {}).get("validation_examples")
        column = metric_of(block)
        held_out = VAL_LOSS if column == "val_loss" else VAL_ACCURACY
        for seed_run in block["runs"]:
            curve = [p for p in seed_run.get("curve") or [] if is_number(p.get("step"))]
            out.append(
                Series(
                    run["run_id"],
                    int(seed_run.get("seed", 0)),
                    device,
                    setup,
                    "evaluation",
                    {
                        TRAIN_LOSS: {int(p["step"]): _finite(p.get("train_loss")) for p in curve},
                        held_out: {int(p["step"]): _finite(p.get(column)) for p in curve},
                    },
                    {int(p["step"]): p.get("epoch") for p in curve},
                    examples,
                )
            )
        return out
    losses = values.get("losses") or []
    per_loop = values.get("steps_per_loop") or spec.get("steps_per_loop") or 1
    if not losses:
        return []
    return [
        Series(
            run["run_id"],
            int(spec.get("seed", 0) or 0),
            device,
            setup,
            "loss per host loop",
            {LOSS: {(i + 1) * int(per_loop): _finite(v) for i, v in enumerate(losses)}},
        )
    ]


def _finite(value) -> Optional[float]:
    return float(value) if is_number(value) and math.isfinite(value) else None


def seed_sigma(curves: list[dict[int, Optional[float]]]) -> Optional[float]:
    """RMS over every pair of curves and every step both have finite values at, of their difference."""
    squares = []
    for a, b in itertools.combinations(curves, 2):
        squares += [(a[k] - b[k]) ** 2 for k in a.keys() & b.keys() if a[k] is not None and b[k] is not None]
    return math.sqrt(sum(squares) / len(squares)) if squares else None


def accuracy_floor(reference: list[dict[int, Optional[float]]], examples: Optional[int]) -> float:
    """sqrt(2 p (1 - p) / n): the noise of the difference of two accuracies on n held-out examples."""
    values = [v for curve in reference for v in curve.values() if v is not None]
    if not values or not examples:
        return 0.0
    p = sum(values) / len(values)
    return math.sqrt(2 * p * (1 - p) / examples)


def departure(run: dict[int, Optional[float]], ref: dict[int, Optional[float]], tolerance: float) -> Optional[int]:
    """The first step of PERSISTENT_POINTS consecutive common steps where `run` is beyond `tolerance`
    of `ref` (or at the only common step), None when it stays within."""
    steps = sorted(k for k in run.keys() & ref.keys() if ref[k] is not None)
    beyond = [run[k] is None or abs(run[k] - ref[k]) > tolerance for k in steps]
    if len(steps) == 1:
        return steps[0] if beyond[0] else None
    for i in range(len(steps) - PERSISTENT_POINTS + 1):
        if all(beyond[i : i + PERSISTENT_POINTS]):
            return steps[i]
    return None


def compare(series: Iterable[Series]) -> list[Verdict]:
    """Every setup (and kind of curve) with runs on two devices or more, judged by the module's rule."""
    groups: dict[tuple, list[Series]] = {}
    for s in series:
        groups.setdefault((s.setup, s.kind), []).append(s)
    verdicts = []
    for (setup, kind), members in groups.items():
        devices = list(dict.fromkeys(s.device for s in members))
        if len(devices) < 2:
            continue
        seeds = {d: {s.seed for s in members if s.device == d} for d in devices}
        reference = max(devices, key=lambda d: len(seeds[d]))  # max keeps the first of equals
        ref_series = {}
        for s in members:  # the first (newest) run of each seed on the reference
            if s.device == reference:
                ref_series.setdefault(s.seed, s)
        others = [s for s in members if s.device != reference and s.seed in ref_series]
        verdict = Verdict(
            setup,
            kind,
            device_text(reference),
            [f"#{s.run_id[-6:]} seed {s.seed} on {device_text(s.device)}" for s in others],
            [],
        )
        if not others:
            verdict.note = (
                f"no run on another device has a seed that {device_text(reference)} has: "
                "nothing to compare step by step"
            )
        elif len(ref_series) < 2:
            verdict.note = (
                f"the reference {device_text(reference)} has one seed: its seed-to-seed spread, "
                "the tolerance, needs two or more (train it with --seeds 2 or more)"
            )
        else:
            verdict.flags = _flags(others, ref_series, reference)
        verdicts.append(verdict)
    return verdicts


def _flags(others: list[Series], ref_series: dict[int, Series], reference: tuple) -> list[Flag]:
    flags = []
    metrics = list(next(iter(ref_series.values())).metrics)
    for metric in metrics:
        curves = [s.metrics[metric] for s in ref_series.values()]
        sigma = seed_sigma(curves)
        if sigma is None:
            continue
        if metric == VAL_ACCURACY:
            sigma = max(sigma, accuracy_floor(curves, next(iter(ref_series.values())).validation_examples))
        tolerance = TOLERANCE_SIGMAS * sigma
        for s in others:
            ref = ref_series[s.seed]
            step = departure(s.metrics.get(metric, {}), ref.metrics[metric], tolerance)
            if step is None:
                continue
            epoch = ref.epochs.get(step) if ref.epochs else None
            flags.append(
                Flag(
                    s.run_id,
                    s.seed,
                    device_text(s.device),
                    metric,
                    ref.run_id,
                    device_text(reference),
                    step,
                    epoch,
                    s.metrics[metric].get(step),
                    ref.metrics[metric][step],
                    tolerance,
                )
            )
    return flags


def verdicts_for(store, run_ids: Iterable[str]) -> list[Verdict]:
    """compare() over the chosen runs' stored curves (one get_run each: only the chosen runs are read)."""
    series = []
    for run_id in run_ids:
        run = store.get_run(run_id)
        if run is not None and run.get("status") in ("done", "not_reached"):
            series += series_of(run)
    return compare(series)


def flag_lines(verdicts: list[Verdict]) -> list[str]:
    """Markdown-safe lines for the page: each flag, then each setup's note; empty when nothing to say."""
    from dashbench.views.common.format import md_text

    lines = [f"- {md_text(flag.text())}" for v in verdicts for flag in v.flags]
    lines += [f"- {md_text(v.kind)} curves: {md_text(v.note)}" for v in verdicts if v.note]
    return lines


def summary(verdicts: list[Verdict]) -> str:
    """One sentence per verdict without a flag: what was compared and with which reference."""
    parts = []
    for v in verdicts:
        if v.flags or v.note:
            continue
        parts.append(
            f"{len(v.compared)} {v.kind} curve(s) on other devices stay within {TOLERANCE_SIGMAS:g}× the "
            f"seed-to-seed spread of the reference {v.reference}"
        )
    if not parts:
        return ""
    return "; ".join(parts) + (
        f". A run departs where it is more than {TOLERANCE_SIGMAS:g}× that spread from the "
        f"reference's run of its seed at {PERSISTENT_POINTS} steps in a row."
    )
