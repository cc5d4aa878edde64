"""A JAX run's memory guard checks XLA's own memory analysis of the run's compiled step (built once, in
the run's own process, before the check), so a model whose memory no layer output shows is guarded
too; elsewhere (TensorFlow) the parameter, slot and activation counts stand. Every result says which.

Keras picks its backend once per process and this one runs TensorFlow: the JAX runs are a process of
their own, as every run dashbench launches is."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from dashbench.cli import main
from dashbench.store import Store

ROOT = Path(__file__).resolve().parents[2]

# Every feature attends over every other: a features × features matrix per example (4 MB at 1024
# features, kept for the backward pass), which no layer outputs, so counting layer outputs misses it.
HIDDEN = """
import keras
from keras import layers, ops


class PairMix(layers.Layer):
    def call(self, x):
        scores = ops.einsum("bi,bj->bij", x, x)
        return ops.einsum("bij,bj->bi", ops.softmax(scores, axis=-1), x)


def build():
    x = keras.Input((1024,), name="x")
    return keras.Model(x, layers.Dense(4)(PairMix()(layers.Dense(1024)(x))))
"""
REFUSED = re.compile(
    r"^error: batch_size: hidden\.py:build@[0-9a-f]{12} at batch 1024 needs about ([\d.]+) GB of "
    r"memory \(estimate: XLA's memory analysis of the compiled step\) but the host \(bound: "
    r"DASHBENCH_MEMORY_BUDGET_GB=4\) has 4\.0 GB available; a batch of at most ~(\d+) would fit$"
)


def test_a_model_whose_memory_no_layer_shows_is_refused_by_xlas_analysis(tmp_path, capfd, monkeypatch):
    from dashbench.core.spec import RunSpec
    from dashbench.engine.workloads import user
    from dashbench.workloads import memory, memory_estimate, model_file

    path = tmp_path / "hidden.py"
    path.write_text(HIDDEN)
    db = tmp_path / "runs.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASHBENCH_MEMORY_BUDGET_GB": "4"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dashbench",
            "run",
            "--model",
            f"{path}:build",
            "--backend",
            "jax",
            "--device",
            "cpu",
            "--batch-size",
            "1024",
            "--steps",
            "2",
            "--warmup",
            "0",
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    found = REFUSED.match(lines[0])
    assert found, lines[0]
    need, fits = float(found.group(1)), int(found.group(2))
    assert need > 8.5 and 0 < fits < 1024  # the scores and their softmax alone: 8.6 GB at 1024
    assert not db.exists() or Store(db).runs().empty

    # The counts (what TensorFlow's guard has, and JAX's had) see a model that fits in 4 GB.
    monkeypatch.setenv("DASHBENCH_MEMORY_BUDGET_GB", "4")
    spec = RunSpec(batch_size=1024, device="cpu", **model_file.reference(f"{path}:build"))
    user.prepare(spec)
    counted = memory_estimate.estimate(spec)
    assert counted.source == "counts" and counted.total < 2e9
    assert memory.check(spec) is None


def test_the_estimate_scales_from_the_compiled_batch_and_adds_the_hosts_part():
    """What the guard checks at a batch other than the compiled one (a device's share, a search's try)."""
    from dashbench.core.spec import RunSpec
    from dashbench.workloads import memory_estimate

    spec = RunSpec(model="conv2d", batch_size=64, device="cpu", backend="jax")
    facts = {
        "fixed_bytes": 1e8,
        "per_example_bytes": 1e6,
        "batch_bytes_per_example": 2e5,
        "state_bytes": 4e7,
        "parameters": 10_000_000,
    }
    memory_estimate.know_compiled(spec, facts)
    try:
        need = memory_estimate.estimate(spec.replace(batch_size=100, replicas=2))
        assert need.source == "xla" and need.params == 10_000_000
        assert need.total == memory_estimate.FRAMEWORK_BYTES + 1e8 + 4e7 + 100 * (1e6 + 2e5)
        # Another backend, precision or shape is another step: the counts stand.
        assert memory_estimate.estimate(spec.replace(backend="tensorflow")).source == "counts"
        assert memory_estimate.estimate(spec.replace(image_size=64)).source == "counts"
    finally:
        memory_estimate.COMPILED_STEPS.pop(memory_estimate.step_key(spec))


def test_a_tensorflow_run_records_the_counts_as_its_estimates_source(tmp_path, capfd):
    db = tmp_path / "runs.sqlite"
    assert (
        main(
            [
                "run",
                "--model",
                "conv2d",
                "--image-size",
                "16",
                "--width",
                "8",
                "--batch-size",
                "8",
                "--steps",
                "2",
                "--warmup",
                "1",
                "--device",
                "cpu",
                "--db",
                str(db),
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capfd.readouterr().out)
    assert result["memory"]["estimate_source"] == "counts" and result["memory"]["estimate_bytes"] > 0
    assert main(["show", result["run_id"], "--db", str(db)]) == 0
    assert "the estimate" in capfd.readouterr().out
