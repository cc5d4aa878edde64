"""Training to a target accuracy, for both backends: RunSpec in, RunResult out.

How it measures (MLPerf Training's rules where they apply):
- both splits are loaded first and timed apart (`load_s`); the first training call and the first
  evaluation (tracing, compilation) are timed apart too (`compile_s`), on the first seed's weights,
  which are then set back, so that seed trains from its initial weights like the others;
- each seed trains from weights built from it, on the train split shuffled from it; the whole
  held-out split is evaluated (loss and accuracy) after every epoch or every eval_every steps,
  inside the timed region; the seed stops at the evaluation that reaches the target (the spec's
  target_metric: a validation accuracy at or above it, or a validation loss at or below it), or
  after max_epochs (epochs, for a fixed count);
- time to target: from the seed's first training step to the end of the evaluation that reached it;
- the training calls are the run's samples: its throughput and step times are over training steps
  only, evaluations excluded, so the run is also a throughput run.

A backend gives a Trainer (engine/tensorflow/accuracy.py, engine/jax/accuracy.py): set_seed(seed) sets the
weights and optimizer state for a seed (outside the timed region); train(xs, ys) runs k stacked
batches and returns their mean loss once it is on the host; evaluate() runs the held-out split and
returns (loss, accuracy) on the host.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

from dashbench.core import accuracy, stats
from dashbench.engine import accuracy_data, hostload, workloads
from dashbench.results.result import RunResult
from dashbench.workloads import catalog, registry

Event = Callable[[dict], None]


def prepare(spec, emit: Event):
    """(workload, shapes, data, plan): everything checked and loaded before a framework starts."""
    workload = registry.get(spec.model)
    shapes = catalog.check_spec(spec)  # bad input is a SpecError before the framework starts
    shapes = workloads.of(spec).data_shapes(shapes)  # a user's model: the image size its input takes
    emit({"event": "phase", "phase": "loading data"})
    data = accuracy_data.load(spec, shapes)
    return workload, shapes, data, accuracy_data.plan(spec, len(data.y_train))


def train(
    spec,
    trainer,
    data: accuracy_data.Data,
    plan: accuracy_data.Plan,
    emit: Event,
    quiet,
    gpu_indices: tuple[int, ...] = (),
) -> tuple[dict, list[dict], float, Optional[dict]]:
    """Every seed, one after another. Returns (the result's accuracy dict, the training samples,
    compile_s, host_load over the timed regions)."""
    seeds = [spec.seed + i for i in range(spec.seeds)]
    k = plan.steps_per_call
    emit({"event": "phase", "phase": "compile"})
    trainer.set_seed(seeds[0])
    with quiet():
        start = time.perf_counter()
        trainer.train(*next(accuracy_data.training_batches(data, spec.batch_size, k, seeds[0])))
        trainer.evaluate()
        compile_s = time.perf_counter() - start
    emit({"event": "compiled", "compile_s": compile_s})
    emit({"event": "phase", "phase": "measure"})
    window = hostload.Window(gpu_indices)
    samples: list[dict] = []
    runs = [_train_seed(spec, trainer, data, plan, seed, index, samples, emit) for index, seed in enumerate(seeds)]
    host_load = window.close()
    fixed = spec.epochs is not None
    summary = accuracy.summarize(
        runs,
        target=spec.target,
        metric=spec.target_metric,
        epochs=spec.epochs,
        max_epochs=None if fixed else spec.epoch_limit(),
        steps_per_epoch=plan.steps_per_epoch,
        eval_every_steps=plan.eval_every,
        dataset=data.dataset,
        load_s=data.load_s,
        compile_s=compile_s,
    )
    return summary, samples, compile_s, host_load


def _train_seed(spec, trainer, data, plan, seed: int, seed_index: int, samples: list, emit: Event) -> dict:
    trainer.set_seed(seed)
    batches = accuracy_data.training_batches(data, spec.batch_size, plan.steps_per_call, seed)
    target, metric, limit, fixed = spec.target, spec.target_metric, spec.epoch_limit(), spec.epochs is not None
    curve: list[dict] = []
    train_s = eval_s = 0.0
    step, reached_at = 0, None
    start = time.perf_counter()
    for evaluate_at in plan.evaluations():
        losses = []
        while step < evaluate_at:
            began = time.perf_counter()
            loss = trainer.train(*next(batches))
            duration = time.perf_counter() - began
            train_s += duration
            step += plan.steps_per_call
            losses.append(loss)
            sample = {
                "event": "sample",
                "index": len(samples),
                "steps": plan.steps_per_call,
                "duration_s": duration,
                "loss": stats.finite_or_none(loss),
                "warmup": False,
            }
            samples.append(sample)
            emit(sample)
        began = time.perf_counter()
        val_loss, val_accuracy = trainer.evaluate()
        now = time.perf_counter()
        eval_s += now - began
        finite = [value for value in losses if stats.finite_or_none(value) is not None]
        point = {
            "wall_s": now - start,
            "step": step,
            "epoch": step / plan.steps_per_epoch,
            "train_loss": sum(finite) / len(finite) if finite else None,
            "val_loss": stats.finite_or_none(val_loss),
            "val_accuracy": float(val_accuracy),
        }
        curve.append(point)
        emit(
            {
                "event": "evaluation",
                "seed": seed,
                "seed_index": seed_index,
                "seeds": spec.seeds,
                "limit": limit,
                "fixed": fixed,
                "target": target,
                "metric": metric,
                **point,
                "text": accuracy.progress_text(
                    point["epoch"], limit, point[metric], fixed, seed_index, spec.seeds, metric, step
                ),
            }
        )
        if accuracy.reached(metric, point[metric], target):
            reached_at = point
            break
    total_s = time.perf_counter() - start
    return {
        "seed": seed,
        "reached": None if target is None else reached_at is not None,
        "time_to_target_s": reached_at["wall_s"] if reached_at else None,
        "steps_to_target": reached_at["step"] if reached_at else None,
        "epochs_to_target": reached_at["epoch"] if reached_at else None,
        "train_s": train_s,
        "eval_s": eval_s,
        "total_s": total_s,
        "final_val_accuracy": curve[-1]["val_accuracy"],
        "final_val_loss": curve[-1]["val_loss"],
        "curve": curve,
    }


def finish(result: RunResult, accuracy_record: dict, samples: list[dict], plan: accuracy_data.Plan) -> RunResult:
    """The throughput result (built by engine/measured.py from the training samples) with the
    accuracy record, the steps actually trained and the run's final status."""
    return result.replace(
        accuracy=accuracy_record,
        steps=int(sum(sample["steps"] for sample in samples)),
        steps_per_loop=plan.steps_per_call,
        status=accuracy.final_status(accuracy_record),
    )
