"""The measured loop: result keys, events, precisions, XLA, steps per loop, and the 2-replica check."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dashbench.core.spec import RunSpec
from dashbench.engine import frameworks, loop
from dashbench.results.result import RunResult

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "result_v3.json"

RESULT_KEYS = {
    "model",
    "unit",
    "device",
    "accelerator",
    "accelerator_count",
    "device_names",
    "replicas",
    "global_batch_size",
    "per_replica_batch_size",
    "precision",
    "xla",
    "data",
    "status",
    "examples_per_sec",
    "examples_per_sec_ci95",
    "step_time_median_s",
    "step_time_p10_s",
    "step_time_p90_s",
    "step_time_std_s",
    "samples",
    "steps",
    "steps_per_loop",
    "compile_s",
    "flops_per_example",
    "achieved_tflops",
    "peak_tflops",
    "peak_source",
    "mfu",
    "flags",
    "losses",
    "placement",
    "env",
    "spec",
}
ENV_KEYS = {
    "tensorflow",
    "keras",
    "python",
    "host",
    "cpu_model",
    "device_names",
    "device_count",
    "precision",
    "xla",
    "dashbench_version",
    "git_commit",
    "platform",
}
TINY_CONV = dict(model="conv2d", batch_size=8, image_size=16, width=8)


@pytest.fixture(autouse=True)
def small_cpu_probe(monkeypatch):
    monkeypatch.setattr(frameworks, "CPU_PROBE_SIZE", 512)


def test_result_keys_events_and_placement():
    events = []
    spec = RunSpec(**TINY_CONV, steps=6, warmup=3, steps_per_loop=3, label="t")
    measured = loop.run(spec, on_event=events.append)
    assert isinstance(measured, RunResult) and measured.run_id is None
    result = measured.to_dict()
    # The stored format: the keys (in order) of a result written before RunResult existed, plus the backend.
    stored = json.loads(FIXTURE.read_text())
    added = {
        "backend",
        "backend_version",
        "host_load",
        "repeats",
        "repeat_cv",  # keys newer than the fixture
        "flops_source",
        "analytic_flops_per_example",
        "compiler_flops_per_example",
        "peak_as_of",
        "profile",
    }
    assert [key for key in result if key not in added] == [key for key in stored if key != "run_id"]
    assert "host_load" in result and "repeats" not in result  # one measurement: no repeats written
    assert result["backend"] == "tensorflow" and result["backend_version"].startswith("2.")
    assert RESULT_KEYS <= set(result), RESULT_KEYS - set(result)
    assert ENV_KEYS <= set(result["env"])
    json.dumps(result, allow_nan=False)
    assert result["device"] == "cpu" and result["accelerator"] == "CPU" and result["accelerator_count"] == 1
    assert result["samples"] == 2 and result["steps"] == 6 and len(result["losses"]) == 3
    assert result["peak_source"] == "measured" and result["peak_tflops"] > 0
    assert result["spec"] == spec.to_dict() and result["status"] == "done"
    assert result["achieved_tflops"] == pytest.approx(result["flops_per_example"] * result["examples_per_sec"] / 1e12)
    assert result["mfu"] == pytest.approx(result["achieved_tflops"] / result["peak_tflops"])
    assert all("CPU:0" in d for d in result["placement"]["variables"] + result["placement"]["ops"])
    assert result["placement"]["ops"], "the step's ops were found"
    assert "placement_mismatch" not in result["flags"]

    phases = [e["phase"] for e in events if e["event"] == "phase"]
    assert phases == ["setup", "compile", "warmup", "measure", "probe"]  # no calibration here: the CPU is probed
    samples = [e for e in events if e["event"] == "sample"]
    assert [s["index"] for s in samples] == [0, 1, 2]
    assert [s["warmup"] for s in samples] == [True, False, False]
    assert all(s["steps"] == 3 and s["duration_s"] > 0 for s in samples)
    compiled = [e for e in events if e["event"] == "compiled"]
    assert len(compiled) == 1 and compiled[0]["compile_s"] == result["compile_s"] > 0
    assert result["step_time_median_s"] == pytest.approx(np.median([s["duration_s"] / 3 for s in samples[1:]]))


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_runs_on_cpu(precision):
    result = loop.run(
        RunSpec(model="bilstm", batch_size=8, seq_len=8, width=16, steps=3, warmup=1, precision=precision)
    )
    assert result.precision == precision
    assert all(np.isfinite(result.losses)) and result.losses[-1] < result.losses[0]


def test_xla_compiles_the_per_replica_step():
    result = loop.run(RunSpec(model="fashion_mnist_cnn", batch_size=16, width=4, steps=3, warmup=1, xla=True))
    assert result.xla is True
    assert all(np.isfinite(result.losses))
    assert result.placement["ops"]


def cli_argv(*options):
    return [sys.executable, "-m", "dashbench", "run", "--no-store", "--json", *options]


def cli_env(**extra):
    return dict(os.environ, DASHBENCH_CPU_PROBE_SIZE="512", **extra)


def cli_run(*options):
    done = subprocess.run(cli_argv(*options), capture_output=True, text=True, timeout=240, env=cli_env())
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


COMMON = [
    "--model",
    "conv2d",
    "--batch-size",
    "8",
    "--image-size",
    "16",
    "--width",
    "8",
    "--steps",
    "4",
    "--warmup",
    "0",
    "--device",
    "cpu",
]


def test_data_parallel_runs_give_the_loss_of_one_replica_at_the_same_global_batch():
    # Logical CPU devices must exist before TensorFlow initialises: a fresh process for each run of
    # several; one replica runs here, in this test's TensorFlow (one process fewer to start).
    one = loop.run(
        RunSpec(model="conv2d", batch_size=8, image_size=16, width=8, steps=4, warmup=0, device="cpu")
    ).to_dict()
    two = cli_run(*COMMON, "--replicas", "2", "--xla")
    assert one["replicas"] == 1 and two["replicas"] == 2 and two["per_replica_batch_size"] == 4
    assert two["xla"] is True
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-4)
    assert one["losses"][-1] < one["losses"][0]
    devices = {d.rsplit(":", 1)[-1] for d in two["placement"]["variables"] + two["placement"]["ops"]}
    assert devices == {"0", "1"}, two["placement"]
    assert "placement_mismatch" not in two["flags"]

    # Two workers on this host through TF_CONFIG: MultiWorkerMirroredStrategy, one replica each.
    cluster = {"worker": [f"localhost:{port}" for port in free_ports(2)]}
    workers = [
        subprocess.Popen(
            cli_argv(*COMMON),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})),
        )
        for i in range(2)
    ]
    outputs = [w.communicate(timeout=240) for w in workers]
    for worker, (out, err) in zip(workers, outputs):
        assert worker.returncode == 0, err
        result = json.loads(out)
        assert result["replicas"] == 2 and result["env"]["multi_worker"] is True
        np.testing.assert_allclose(result["losses"], one["losses"], rtol=1e-4)
