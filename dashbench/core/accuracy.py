"""A to-accuracy run's result: its curve per seed, whether the target was reached, the time
to it, the seeds' median; the shape RunResult.check holds it to, the summary the engine builds, the
run's final status and the progress line of each evaluation. No TensorFlow here.

The stored dict (RunResult.accuracy):
  metric (the curve's column the target is read against: val_accuracy rises to it, val_loss falls to
  it; absent in results stored before loss targets, which read as val_accuracy),
  target, epochs, max_epochs, steps_per_epoch, eval_every_steps,
  dataset {name, train_examples, validation_examples, classes; an LM's text also tokens_per_example
  and loss_floor, the teacher's entropy}, load_s, compile_s,
  runs [{seed, reached, time_to_target_s, steps_to_target, epochs_to_target, train_s, eval_s, total_s,
         final_val_accuracy, final_val_loss (newer results), curve [{wall_s, step, epoch, train_loss,
         val_loss, val_accuracy}]}],
  reached, time_to_target_median_s, time_to_target_min_s, time_to_target_max_s, epochs_to_target_median
An LM's val_accuracy is its next-token accuracy; its target is a validation loss.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Optional

NOT_REACHED = "not_reached"
# One point per evaluation: a run evaluating every step of 100k steps is the most a result holds.
MAX_CURVE_POINTS = 100_000
MAX_RUNS = 1000

TOP_KEYS = (
    "target",
    "epochs",
    "max_epochs",
    "steps_per_epoch",
    "eval_every_steps",
    "dataset",
    "load_s",
    "compile_s",
    "runs",
    "reached",
    "time_to_target_median_s",
    "time_to_target_min_s",
    "time_to_target_max_s",
    "epochs_to_target_median",
)
RUN_KEYS = (
    "seed",
    "reached",
    "time_to_target_s",
    "steps_to_target",
    "epochs_to_target",
    "train_s",
    "eval_s",
    "total_s",
    "final_val_accuracy",
    "curve",
)
POINT_KEYS = ("wall_s", "step", "epoch", "train_loss", "val_loss", "val_accuracy")
DATASET_KEYS = ("name", "train_examples", "validation_examples", "classes")
# The metrics a target can be read against, and their words.
METRICS = {"val_accuracy": "validation accuracy", "val_loss": "validation loss"}


def metric_of(accuracy: Any) -> str:
    """A stored record's metric (val_accuracy for one stored before loss targets)."""
    metric = accuracy.get("metric") if isinstance(accuracy, dict) else None
    return metric if metric in METRICS else "val_accuracy"


def reached(metric: str, value: Optional[float], target: Optional[float]) -> bool:
    """Whether `value` of `metric` meets `target`: an accuracy at or above it, a loss at or below it."""
    if target is None or not _number(value):
        return False
    return value <= target if metric == "val_loss" else value >= target


def summarize(
    runs: list[dict],
    *,
    target: Optional[float],
    epochs: Optional[int],
    max_epochs: Optional[int],
    steps_per_epoch: int,
    eval_every_steps: int,
    dataset: dict,
    load_s: float,
    compile_s: float,
    metric: str = "val_accuracy",
) -> dict[str, Any]:
    """The stored dict from the seeds' runs (each with RUN_KEYS): the headline over the seeds that
    reached the target (median, min and max time; median epochs)."""
    reached = [run for run in runs if run.get("reached")]
    times = [run["time_to_target_s"] for run in reached]
    epochs_to = [run["epochs_to_target"] for run in reached]
    return {
        "metric": metric,
        "target": target,
        "epochs": epochs,
        "max_epochs": max_epochs,
        "steps_per_epoch": steps_per_epoch,
        "eval_every_steps": eval_every_steps,
        "dataset": dict(dataset),
        "load_s": load_s,
        "compile_s": compile_s,
        "runs": runs,
        "reached": len(reached),
        "time_to_target_median_s": statistics.median(times) if times else None,
        "time_to_target_min_s": min(times) if times else None,
        "time_to_target_max_s": max(times) if times else None,
        "epochs_to_target_median": statistics.median(epochs_to) if epochs_to else None,
    }


def final_status(accuracy: Optional[dict]) -> str:
    """'done', or 'not_reached' where a target was set and at most half the seeds reached it."""
    if not isinstance(accuracy, dict) or accuracy.get("target") is None:
        return "done"
    runs = accuracy.get("runs") or []
    return "done" if runs and accuracy.get("reached", 0) * 2 > len(runs) else NOT_REACHED


def progress_text(
    epoch: float,
    limit: Optional[int],
    value: Optional[float],
    fixed: bool,
    seed_index: int = 0,
    seeds: int = 1,
    metric: str = "val_accuracy",
    step: Optional[int] = None,
) -> str:
    """'epoch 3 of ≤ 20: validation accuracy 0.874' (a target's bound), 'epoch 3 of 5: …' (a fixed
    count), 'epoch 2.5 …' between epochs; with several seeds 'seed 2/3 · ' before it. A loss metric:
    'epoch 0.195 of ≤ 20: validation loss 3.412 at step 400' (an LM evaluates within an epoch)."""
    loss = metric == "val_loss"
    shown = (f"{epoch:.3g}" if loss else f"{epoch:g}") if epoch != int(epoch) else str(int(epoch))
    bound = "" if limit is None else f" of {limit}" if fixed else f" of ≤ {limit}"
    prefix = f"seed {seed_index + 1}/{seeds} · " if seeds > 1 else ""
    figure = f"{value:.3f}" if _number(value) else "not finite"
    at = f" at step {step}" if loss and step is not None else ""
    return f"{prefix}epoch {shown}{bound}: {METRICS.get(metric, metric)} {figure}{at}"


# -- RunResult.check's rule for the stored dict ---------------------------------------------------


def check(name: str, value: Any, finite: bool = True) -> None:
    """Raises ValueError 'accuracy.field: must be …' unless `value` is None or has the stored shape.
    `finite=False` lets numbers be NaN, infinite or negative (a stored row shown with blanks)."""
    if value is None:
        return
    _object(name, value, TOP_KEYS)
    if "metric" in value and value["metric"] not in METRICS:
        _fail(f"{name}.metric", f"one of {', '.join(METRICS)}", value["metric"])
    target = value["target"]
    if metric_of(value) == "val_loss":
        if target is not None and (not _is_real(target) or (finite and not (math.isfinite(target) and target > 0))):
            _fail(f"{name}.target", "a finite loss > 0 or null", target)
    elif target is not None and (not _is_real(target) or (finite and not 0 < target <= 1)):
        _fail(f"{name}.target", "a fraction in (0, 1] or null", target)
    for key in ("epochs", "max_epochs"):
        _count(f"{name}.{key}", value[key], null=True)
    for key in ("steps_per_epoch", "eval_every_steps", "reached"):
        _count(f"{name}.{key}", value[key])
    _object(f"{name}.dataset", value["dataset"], DATASET_KEYS)
    if not isinstance(value["dataset"]["name"], str):
        _fail(f"{name}.dataset.name", "text", value["dataset"]["name"])
    for key in DATASET_KEYS[1:]:
        _count(f"{name}.dataset.{key}", value["dataset"][key])
    for key in ("load_s", "compile_s"):
        _amount(f"{name}.{key}", value[key], finite)
    for key in ("time_to_target_median_s", "time_to_target_min_s", "time_to_target_max_s", "epochs_to_target_median"):
        _amount(f"{name}.{key}", value[key], finite, null=True)
    runs = value["runs"]
    if not isinstance(runs, list) or len(runs) > MAX_RUNS:
        _fail(f"{name}.runs", f"a list of at most {MAX_RUNS} runs (one per seed)", runs)
    if value["reached"] > len(runs):
        _fail(f"{name}.reached", f"at most the {len(runs)} run(s) listed", value["reached"])
    for index, run in enumerate(runs):
        _check_run(f"{name}.runs[{index}]", run, finite)


def _check_run(where: str, run: Any, finite: bool) -> None:
    _object(where, run, RUN_KEYS)
    _count(f"{where}.seed", run["seed"])
    if run["reached"] is not None and not isinstance(run["reached"], bool):
        _fail(f"{where}.reached", "true, false or null", run["reached"])
    _amount(f"{where}.time_to_target_s", run["time_to_target_s"], finite, null=True)
    _count(f"{where}.steps_to_target", run["steps_to_target"], null=True)
    _amount(f"{where}.epochs_to_target", run["epochs_to_target"], finite, null=True)
    for key in ("train_s", "eval_s", "total_s", "final_val_accuracy"):
        _amount(f"{where}.{key}", run[key], finite)
    if run.get("final_val_loss") is not None and not (
        _number(run["final_val_loss"]) if finite else _is_real(run["final_val_loss"])
    ):
        _fail(f"{where}.final_val_loss", "a finite number or null", run["final_val_loss"])
    curve = run["curve"]
    if not isinstance(curve, list) or len(curve) > MAX_CURVE_POINTS:
        _fail(f"{where}.curve", f"a list of at most {MAX_CURVE_POINTS} points (one per evaluation)", curve)
    for index, point in enumerate(curve):
        at = f"{where}.curve[{index}]"
        _object(at, point, POINT_KEYS)
        _count(f"{at}.step", point["step"])
        for key in ("wall_s", "epoch", "val_accuracy"):
            _amount(f"{at}.{key}", point[key], finite)
        for key in ("train_loss", "val_loss"):  # null: the loss was NaN or infinite
            if point[key] is not None and not (_number(point[key]) if finite else _is_real(point[key])):
                _fail(f"{at}.{key}", "a finite number or null", point[key])


def _object(name: str, value: Any, keys: tuple) -> None:
    if not isinstance(value, dict):
        _fail(name, "an object", value)
    missing = [key for key in keys if key not in value]
    if missing:
        _fail(name, f"an object with the keys {', '.join(keys)}; {missing[0]} is missing", sorted(value)[:8])


def _count(name: str, value: Any, null: bool = False) -> None:
    if value is None and null:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        _fail(name, "a whole number >= 0" + (" or null" if null else ""), value)


def _amount(name: str, value: Any, finite: bool, null: bool = False) -> None:
    if value is None and null:
        return
    if not _is_real(value) or (finite and not (math.isfinite(value) and value >= 0)):
        _fail(name, "a finite number >= 0" + (" or null" if null else ""), value)


def _fail(name: str, what: str, value: Any) -> None:
    shown = repr(value)
    raise ValueError(f"{name}: must be {what}, got {shown if len(shown) <= 60 else shown[:57] + '...'}")


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return _is_real(value) and math.isfinite(value)
