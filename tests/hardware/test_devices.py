"""Device discovery and strategies: a missing device is a clear error, never a CPU fall-back."""

import json
import os
import subprocess
import sys

import pytest

from dashbench.core.spec import RunSpec, SpecError
from dashbench.engine.tensorflow import devices


def test_canonical_names():
    assert devices.canonical_gpu("NVIDIA H100 80GB HBM3") == "H100"
    assert devices.canonical_gpu("Tesla V100-SXM2-16GB") == "V100"
    assert devices.canonical_gpu("NVIDIA L4") == "L4"
    assert devices.canonical_gpu("NVIDIA L40S") == "NVIDIA L40S"  # not an L4
    assert devices.canonical_gpu("Tesla K80") == "K80"
    assert devices.canonical_tpu("v5litepod-8") == "TPU v5e"
    assert devices.canonical_tpu("v3-8") == "TPU v3"
    assert devices.canonical_tpu("v6e-16") == "TPU v6e"
    assert devices.canonical_tpu("") == "TPU"


def test_device_error_is_a_spec_error_naming_the_field():
    error = devices.DeviceError("gpu requested but ...")
    assert isinstance(error, SpecError) and error.field == "device"
    assert str(error).startswith("device: ")


def test_discover_and_a_missing_gpu():
    info = devices.discover()
    assert info["default_device"] == "cpu" and info["gpus"] == []
    assert any(d["type"] == "CPU" for d in info["physical_devices"])
    with pytest.raises(
        devices.DeviceError, match=r"device: gpu requested but TensorFlow sees no GPU; found: CPU \(\d+ cores\)"
    ):
        devices.create(RunSpec(model="conv2d", batch_size=8, device="gpu"))


def test_one_cpu_replica_and_the_divisibility_check():
    target = devices.create(RunSpec(model="conv2d", batch_size=8, device="auto"))
    assert (target.kind, target.accelerator, target.replicas) == ("cpu", "CPU", 1)
    assert target.strategy.num_replicas_in_sync == 1


def test_tpu_requested_here_gives_the_clear_error():
    # TPUClusterResolver → initialize_tpu_system runs for real and fails for lack of hardware.
    # A fresh process: an attempted TPU initialisation must not leak into other tests.
    env = dict(os.environ, DASHBENCH_CPU_PROBE_SIZE="512")
    argv = [
        sys.executable,
        "-m",
        "dashbench",
        "run",
        "--model",
        "conv2d",
        "--batch-size",
        "8",
        "--device",
        "tpu",
        "--no-store",
        "--json",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2
    obj = json.loads(done.stdout)  # --json: one object on stdout, also for bad input
    assert (obj["status"], obj["field"], obj["device"]) == ("invalid", "device", "tpu") and "run_id" not in obj
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert errors[0].startswith("error: device: tpu requested (tpu='local') but no TPU could be initialised")
    assert "found: CPU" in errors[0] and "use --device cpu" in errors[0]
    assert "Traceback" not in done.stderr
