"""Fixture data for the dashboard tests: a real SQLite store filled through the Store API with
results shaped like the engine's (the numbers are made up but plausible; nothing is asserted on them
except that the pages show what was stored)."""

from __future__ import annotations

import math
import random

from dashbench.models import catalog
from dashbench.core.spec import RunSpec
from dashbench.store import Store

# accelerator, device kind, count, examples/s per example-size unit (fashion_mnist_cnn at batch 128)
SETUPS = [
    ("CPU", "cpu", 1, 410.0),
    ("V100", "gpu", 1, 9100.0),
    ("T4", "gpu", 1, 3900.0),
    ("TPU v2", "tpu", 4, 26000.0),
]
MODELS = {"fashion_mnist_cnn": ("images", 1.0), "resnet50": ("images", 0.045), "bilstm": ("sequences", 0.2)}


def fake_result(spec: RunSpec, accelerator: str, kind: str, count: int, eps: float, flags: list[str],
                rng: random.Random) -> tuple[dict, list[dict]]:
    step = spec.batch_size / eps
    samples, losses = [], []
    loss = 2.3
    for i in range(spec.warmup + spec.steps):
        warm = i < spec.warmup
        loss = loss * (1.0 if "loss_not_falling" in flags else 0.93) + rng.uniform(-0.01, 0.01)
        duration = step * (3.0 if i == 0 else rng.uniform(0.95, 1.08))
        samples.append({"index": i, "steps": 1, "duration_s": duration, "loss": loss, "warmup": warm})
        losses.append(loss)
    measured = sorted(s["duration_s"] for s in samples if not s["warmup"])
    median = measured[len(measured) // 2]
    result = {
        "model": spec.model, "unit": MODELS[spec.model][0] if spec.model in MODELS else catalog.get(spec.model).unit, "device": kind, "accelerator": accelerator,
        "accelerator_count": count, "device_names": [f"/device:{kind.upper()}:{i}" for i in range(count)],
        "replicas": count, "global_batch_size": spec.batch_size, "per_replica_batch_size": spec.batch_size // count,
        "precision": spec.precision, "xla": spec.xla, "data": spec.data, "status": "done",
        "examples_per_sec": eps, "examples_per_sec_ci95": [eps * 0.97, eps * 1.03],
        "step_time_median_s": median, "step_time_p10_s": measured[max(0, len(measured) // 10)],
        "step_time_p90_s": measured[min(len(measured) - 1, math.ceil(len(measured) * 0.9) - 1)],
        "step_time_std_s": step * 0.03, "samples": spec.steps, "steps": spec.steps, "steps_per_loop": 1,
        "compile_s": rng.uniform(2, 30), "flops_per_example": 2.1e8, "achieved_tflops": eps * 2.1e8 * 3 / 1e12,
        "peak_tflops": 45.0 * count if kind == "tpu" else 15.7, "peak_source": "datasheet", "mfu": 0.2,
        "flags": flags, "losses": losses,
        "placement": {"variables": [f"/device:{kind.upper()}:0"], "ops": [f"/device:{kind.upper()}:0"]},
        "env": {"tensorflow": "2.20.0", "keras": "3.15.1", "python": "3.12", "host": "fixture-host",
                "cpu_model": "Fixture CPU", "device_names": [], "device_count": count, "precision": spec.precision,
                "xla": spec.xla, "dashbench_version": "0.1.0", "git_commit": "abc1234", "platform": "Linux"},
        "spec": spec.to_dict(),
    }
    if spec.backend != "tensorflow":  # as the engine writes it; a TensorFlow run of before has neither key
        result["backend"], result["backend_version"] = spec.backend, BACKEND_VERSIONS[spec.backend]
    return result, samples


BACKEND_VERSIONS = {"tensorflow": "2.20.0", "jax": "0.10.2"}


def fill_two_backends(path, batch_sizes=(64,)) -> dict[tuple[str, int], str]:
    """The same model and device at each batch size on TensorFlow and on JAX (JAX faster).
    Returns {(backend, batch size): run id}."""
    rng = random.Random(1)
    ids = {}
    with Store(path) as store:
        for batch in batch_sizes:
            for backend, speed in (("tensorflow", 1.0), ("jax", 1.4)):
                spec = RunSpec(model="fashion_mnist_cnn", batch_size=batch, device="cpu", steps=6, backend=backend)
                ids[(backend, batch)] = _finished(store, spec, "CPU", "cpu", 1, 400.0 * speed * (batch / 64) ** 0.3,
                                                  [], rng)
    return ids


def fill_two_units(path) -> dict[str, str]:
    """One priced run (TPU v2, 4 chips) of an LM, whose unit is the token, and one of an image model.
    Returns {model: run id}."""
    rng = random.Random(2)
    with Store(path) as store:
        return {model: _finished(store, RunSpec(model=model, batch_size=8, device="tpu", steps=6), "TPU v2", "tpu", 4,
                                 eps, [], rng)
                for model, eps in (("llama", 52_000.0), ("fashion_mnist_cnn", 26_000.0))}


def fill(path, n_runs: int = 40, seed: int = 0) -> list[str]:
    """A store with n_runs finished runs (some flagged, a sweep, one failed, one queued). Returns run ids."""
    rng = random.Random(seed)
    ids = []
    with Store(path) as store:
        sweep = "sweep-fixture-1"
        for batch in (32, 64, 128, 256):
            spec = RunSpec(model="fashion_mnist_cnn", batch_size=batch, device="cpu", steps=8, label="cpu sweep")
            eps = 410.0 * (batch / 128) ** 0.3
            ids.append(_finished(store, spec, "CPU", "cpu", 1, eps, [], rng, sweep_id=sweep))
        i = 0
        while len(ids) < n_runs - 2:
            accelerator, kind, count, base = SETUPS[i % len(SETUPS)]
            model = list(MODELS)[i % len(MODELS)]
            batch = (32, 128, 1024)[i % 3]
            flags = []
            if i % 7 == 3:
                flags.append("above_peak")
            if model == "bilstm" and kind == "tpu":
                flags.append("loss_not_falling")
            if i % 11 == 5:
                flags.append("placement_mismatch")
            spec = RunSpec(model=model, batch_size=batch, device=kind, steps=6,
                           precision=("float32", "mixed_bfloat16")[i % 2], label=f"sample {i}" if i % 4 else None)
            eps = base * MODELS[model][1] * rng.uniform(0.9, 1.1)
            ids.append(_finished(store, spec, accelerator, kind, count, eps, flags, rng))
            i += 1
        failed = store.create_run(RunSpec(model="resnet50", batch_size=64, device="cpu"), status="running")
        store.finish_run(failed, "failed", error="ResourceExhaustedError: OOM when allocating tensor")
        ids.append(failed)
        queued = store.create_run(RunSpec(model="resnet50", batch_size=32, device="tpu"), status="queued")
        store.request_cancel(queued)  # ends cancelled: no live job is left behind for the app to pump
        ids.append(queued)
    return ids


def _finished(store, spec, accelerator, kind, count, eps, flags, rng, sweep_id=None) -> str:
    run_id = store.create_run(spec, status="running", sweep_id=sweep_id)
    result, samples = fake_result(spec, accelerator, kind, count, eps, flags, rng)
    store.add_samples(run_id, samples)
    store.finish_run(run_id, "done", result=result)
    return run_id
