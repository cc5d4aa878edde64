"""A to-accuracy run's record in words and table columns: the headline `run`, `preset` and
`show` print, the curve per seed, and the columns of `list`, the CSV and the pages. Reads the dict of
RunResult.accuracy (its shape and final status: dashbench/core/accuracy.py). No TensorFlow here.
"""

from __future__ import annotations

import math
from statistics import median
from typing import Any, Optional

from dashbench.core.accuracy import METRICS, NOT_REACHED, final_status, metric_of

# `run` and `preset` exit with this when the run trained but missed its target (0 done, 1 failed,
# 2 bad input, 3 out of memory, 128+N a signal): a script tells a miss from a crash.
EXIT_NOT_REACHED = 4

# Column name -> what it holds (list, CSV, Results); every one is None for a throughput run.
ACCURACY_COLUMNS = {
    "target_accuracy": "the validation accuracy the run trained to",
    "target_loss": "the validation loss the run trained down to (an LM's log-perplexity)",
    "reached": "seeds that reached the target",
    "seeds": "seeds trained",
    "time_to_target_s": "median over the seeds that reached it: first training step to the end of the "
    "evaluation that reached it, evaluations included",
    "time_to_target_min_s": "fastest seed's time to target",
    "time_to_target_max_s": "slowest seed's time to target",
    "epochs_to_target": "median epochs to target",
    "steps_to_target": "median training steps to target",
    "final_val_accuracy": "last validation accuracy (median over seeds; an LM's next-token accuracy)",
    "final_val_loss": "last validation loss (median over seeds)",
    "epochs_trained": "epochs trained (the most over seeds)",
    "eval_share": "share of the timed region spent evaluating",
    "load_s": "data loading, outside the timed region",
}


def _num(value: Any) -> Optional[float]:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _runs(accuracy: dict) -> list[dict]:
    return [r for r in (accuracy.get("runs") or []) if isinstance(r, dict)]


def seconds(value: Optional[float]) -> str:
    if value is None:
        return "—"
    if value < 0.1:
        return f"{value * 1000:.2g} ms"
    if value >= 120:
        return f"{value / 60:.1f} min ({value:,.0f} s)"
    return f"{value:.3g} s" if value < 10 else f"{value:.1f} s"


def _epochs(value: Optional[float]) -> str:
    if value is None:
        return "—"
    return f"{value:.3g}"


def eval_share(accuracy: dict) -> Optional[float]:
    runs = _runs(accuracy)
    total = sum(_num(r.get("total_s")) or 0.0 for r in runs)
    evals = sum(_num(r.get("eval_s")) or 0.0 for r in runs)
    return evals / total if total > 0 else None


def epochs_trained(run: dict) -> Optional[float]:
    curve = [p for p in (run.get("curve") or []) if isinstance(p, dict)]
    return _num(curve[-1].get("epoch")) if curve else None


def chance_hint(accuracy: Optional[dict]) -> str:
    """'accuracy stayed at chance (0.50 for 2 classes): …' when no evaluation of any seed left 1/classes
    (a model that answers one class for every image: labels that do not follow the images, or a learning
    rate that threw the weights away); '' otherwise."""
    if (
        not isinstance(accuracy, dict)
        or not isinstance(accuracy.get("dataset"), dict)
        or metric_of(accuracy) != "val_accuracy"
    ):
        return ""
    classes = accuracy["dataset"].get("classes")
    if not isinstance(classes, int) or isinstance(classes, bool) or classes < 2:
        return ""
    chance = 1 / classes
    # Close enough to call chance: an unbalanced validation split puts a one-class model a little off 1/k.
    tolerance = min(0.02, 0.5 / classes)
    points = [_num(p.get("val_accuracy")) for r in _runs(accuracy) for p in r.get("curve") or [] if isinstance(p, dict)]
    if not points or any(v is None or abs(v - chance) > tolerance for v in points):
        return ""
    shown = f"{chance:.2f}" if chance >= 0.01 else f"{chance:.2g}"
    return f"accuracy stayed at chance ({shown} for {classes} classes): check the labels and the learning rate"


def result_lines(result) -> list[str]:
    """A finished run's headline lines on the pages ("To accuracy: target 0.9 NOT reached …"); none for a
    throughput run. `result` is a RunResult or None."""
    lines = headline(getattr(result, "accuracy", None))
    return [f"To accuracy: {lines[0]}", *lines[1:]] if lines else []


def headline(accuracy: Optional[dict], usd_per_hour: Optional[float] = None) -> list[str]:
    """What the run came to, in a few lines: reached or not, time (and cost) to target as a median with
    its spread over seeds, epochs to target, compile and loading apart, the evaluation's share."""
    if not isinstance(accuracy, dict):
        return []
    runs = _runs(accuracy)
    target = _num(accuracy.get("target"))
    metric = metric_of(accuracy)
    what, loss = METRICS[metric], metric == "val_loss"
    n = len(runs)
    lines = []
    if target is not None:
        reached = sum(1 for r in runs if r.get("reached"))
        limit = accuracy.get("max_epochs")
        within = f" within {limit} epoch{'s' if limit != 1 else ''}" if limit else ""
        named = f"{what} {target:g}" if loss else f"{target:g}"
        if final_status(accuracy) == NOT_REACHED:
            values = [v for v in (_num(p.get(metric)) for r in runs for p in r.get("curve") or []) if v is not None]
            best = (min(values) if loss else max(values)) if values else None
            lines.append(
                f"target {named} NOT reached{within}: {reached} of {n} seed{'s' if n != 1 else ''} "
                f"reached it; best {what} " + ("—" if best is None else f"{best:.4f}")
            )
        else:
            lines.append(f"target {named} reached by {reached} of {n} seed{'s' if n != 1 else ''}{within}")
        times = [t for t in (_num(r.get("time_to_target_s")) for r in runs if r.get("reached")) if t is not None]
        if times:
            mid = _num(accuracy.get("time_to_target_median_s")) or median(times)
            text = f"{reached_text(runs, metric)} after {seconds(mid)}" if loss else f"time to target {seconds(mid)}"
            text += (
                f" median (min {seconds(min(times))}, max {seconds(max(times))} over {len(times)} seeds)"
                if len(times) > 1
                else ""
            )
            if usd_per_hour is not None:
                text += f"; cost to target ${mid * usd_per_hour / 3600:,.4g}"
            epochs = _num(accuracy.get("epochs_to_target_median"))
            if epochs is None:
                found = [
                    e for e in (_num(r.get("epochs_to_target")) for r in runs if r.get("reached")) if e is not None
                ]
                epochs = median(found) if found else None
            text += f"; {_epochs(epochs)} epochs to target" + (" (median)" if len(times) > 1 else "")
            lines.append(text)
    else:
        finals = [v for v in (_final(r, metric) for r in runs) if v is not None]
        totals = [v for v in (_num(r.get("total_s")) for r in runs) if v is not None]
        epochs = accuracy.get("epochs")
        several = " (median over seeds)" if n > 1 else ""
        parts = []
        if finals:
            parts.append(f"final {what} {median(finals):.4f}{several}")
        if totals:
            parts.append(
                f"{'they' if epochs else 'training'} took {seconds(median(totals))}{several}, evaluations included"
            )
        lines.append(f"{epochs or 'no'} epochs, no target: " + "; ".join(parts))
    hint = chance_hint(accuracy)
    if hint:
        lines.append(hint)
    dataset = accuracy.get("dataset")
    floor = _num(dataset.get("loss_floor")) if isinstance(dataset, dict) else None
    if floor is not None:
        lines.append(f"the teacher's entropy floor (the lowest validation loss any model reaches): {floor:.4f} nats")
    apart = [
        f"{what} {seconds(_num(accuracy.get(key)))}"
        for key, what in (("compile_s", "compile"), ("load_s", "data loading"))
        if _num(accuracy.get(key)) is not None
    ]
    share = eval_share(accuracy)
    tail = []
    if apart:
        tail.append(" and ".join(apart) + " apart")
    if share is not None:
        tail.append(f"evaluation {share:.0%} of the timed time")
    if tail:
        lines.append("; ".join(tail))
    return lines


def _final(run: dict, metric: str) -> Optional[float]:
    """A seed's last value of `metric` (its curve's last point where the run stored none apart)."""
    value = _num(run.get(f"final_{metric}"))
    curve = [p for p in run.get("curve") or [] if isinstance(p, dict)]
    return value if value is not None or not curve else _num(curve[-1].get(metric))


def reached_text(runs: list[dict], metric: str) -> str:
    """'validation loss 3.28 reached at step 400': the value at the evaluation that reached the target
    and its step, the median over the seeds that reached it."""
    hits = [
        point
        for r in runs
        if r.get("reached")
        for point in r.get("curve") or []
        if isinstance(point, dict) and point.get("step") == r.get("steps_to_target")
    ]
    values = [v for v in (_num(p.get(metric)) for p in hits) if v is not None]
    steps = [s for s in (_num(r.get("steps_to_target")) for r in runs if r.get("reached")) if s is not None]
    several = " (median)" if len(steps) > 1 else ""
    value = f" {median(values):.2f}" if values else ""
    return f"{METRICS[metric]}{value} reached at step {median(steps):.0f}{several}" if steps else METRICS[metric]


def curve_lines(accuracy: Optional[dict]) -> list[str]:
    """The curve per seed, one line per evaluation: epoch, step, wall time, validation accuracy and loss."""
    if not isinstance(accuracy, dict):
        return []
    lines = []
    for run in _runs(accuracy):
        if run.get("reached"):
            end = f"reached the target in {seconds(_num(run.get('time_to_target_s')))}"
        else:
            end = "did not reach the target" if run.get("reached") is False else "no target"
        lines.append(f"seed {run.get('seed')}: {end}")
        lines.append(f"  {'epoch':>7} {'step':>8} {'wall s':>9} {'val acc':>8} {'val loss':>9} {'train loss':>10}")
        for point in run.get("curve") or []:
            if isinstance(point, dict):
                lines.append(
                    f"  {_fmt(point.get('epoch'), '7.2f')} {_fmt(point.get('step'), '8.0f')} "
                    f"{_fmt(point.get('wall_s'), '9.2f')} {_fmt(point.get('val_accuracy'), '8.4f')} "
                    f"{_fmt(point.get('val_loss'), '9.4f')} {_fmt(point.get('train_loss'), '10.4f')}"
                )
    return lines


def _fmt(value: Any, spec: str) -> str:
    number = _num(value)
    width = int(spec.split(".")[0])
    return format(number, spec) if number is not None else "—".rjust(width)


def columns_of(accuracy: Optional[dict]) -> dict[str, Any]:
    """ACCURACY_COLUMNS for one run (all None for a throughput run)."""
    out: dict[str, Any] = {name: None for name in ACCURACY_COLUMNS}
    if not isinstance(accuracy, dict):
        return out
    runs = _runs(accuracy)
    target = _num(accuracy.get("target"))
    times = [t for t in (_num(r.get("time_to_target_s")) for r in runs if r.get("reached")) if t is not None]
    finals = [v for v in (_num(r.get("final_val_accuracy")) for r in runs) if v is not None]
    losses = [v for v in (_final(r, "val_loss") for r in runs) if v is not None]
    steps = [s for s in (_num(r.get("steps_to_target")) for r in runs if r.get("reached")) if s is not None]
    epochs = [e for e in (epochs_trained(r) for r in runs) if e is not None]
    loss = metric_of(accuracy) == "val_loss"
    out.update(
        target_accuracy=None if loss else target,
        target_loss=target if loss else None,
        seeds=len(runs),
        steps_to_target=median(steps) if steps else None,
        final_val_loss=median(losses) if losses else None,
        reached=sum(1 for r in runs if r.get("reached")) if target is not None else None,
        time_to_target_s=(_num(accuracy.get("time_to_target_median_s")) or median(times)) if times else None,
        time_to_target_min_s=min(times) if times else None,
        time_to_target_max_s=max(times) if times else None,
        epochs_to_target=_num(accuracy.get("epochs_to_target_median")) if times else None,
        final_val_accuracy=median(finals) if finals else None,
        epochs_trained=max(epochs) if epochs else None,
        eval_share=eval_share(accuracy),
        load_s=_num(accuracy.get("load_s")),
    )
    if times and out["epochs_to_target"] is None:
        found = [e for e in (_num(r.get("epochs_to_target")) for r in runs if r.get("reached")) if e is not None]
        out["epochs_to_target"] = median(found) if found else None
    return out


def accuracy_columns(results) -> dict[str, list]:
    """ACCURACY_COLUMNS for each of `results` (RunResults or None), None where a run has no curve."""
    out: dict[str, list] = {name: [] for name in ACCURACY_COLUMNS}
    for result in results:
        row = columns_of(getattr(result, "accuracy", None))
        for name in ACCURACY_COLUMNS:
            out[name].append(row[name])
    return out
