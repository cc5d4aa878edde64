"""Each run records its peak memory beside the pre-run estimate: the process's on a CPU (over the run
and the measured window), the devices' on a GPU or TPU (per device and summed, with their memory),
from TensorFlow's get_memory_info and JAX's memory_stats — those paths with stand-in devices here."""

import json
import os
import subprocess
import sys

import pytest

from dashbench.engine import peak_memory
from dashbench.hardware import host
from dashbench.results.result import RunResult
from dashbench.store import validate

GB = 10**9


class FakeJaxDevice:
    def __init__(self, index, peaks, limit=16 * GB, platform="gpu"):
        self.id, self.platform, self.peaks, self.limit = index, platform, list(peaks), limit

    def memory_stats(self):
        peak = self.peaks.pop(0) if len(self.peaks) > 1 else self.peaks[0]
        return {"bytes_in_use": 1, "peak_bytes_in_use": peak, "bytes_limit": self.limit}


class FakeTfExperimental:
    """tf.config.experimental's two calls: a peak per device that a reset brings down to `current`."""

    def __init__(self, peaks):
        self.peaks = dict(peaks)
        self.resets = []

    def get_memory_info(self, name):
        return {"current": 1, "peak": self.peaks[name]}

    def reset_memory_stats(self, name):
        self.resets.append(name)
        self.peaks[name] = 1 * GB


def events(tracker, samples=3):
    tracker({"event": "phase", "phase": "warmup"})
    tracker({"event": "sample", "warmup": True})
    tracker({"event": "phase", "phase": "measure"})
    for _ in range(samples):
        tracker({"event": "sample", "warmup": False})
    tracker({"event": "phase", "phase": "probe"})


def test_jax_devices_peaks_are_summed_with_their_memory_and_the_estimate():
    # Each device: its peak before the window, then during it (device 1's grows in the window).
    devices = [
        FakeJaxDevice(0, [0, 5 * GB]),
        FakeJaxDevice(1, [0, 3 * GB, 3 * GB, 6 * GB]),
        FakeJaxDevice(0, [0], platform="cpu"),
    ]
    tracker = peak_memory.Tracker(meters_for=lambda backend: peak_memory.jax_meters(devices))
    events(tracker)
    out = tracker.summary(estimate_bytes=10 * GB)
    assert out["kind"] == "device" and out["source"] == peak_memory.JAX_SOURCE
    assert [d["name"] for d in out["devices"]] == ["gpu:0", "gpu:1"]  # the CPU device keeps no stats
    assert [d["peak_bytes"] for d in out["devices"]] == [5 * GB, 6 * GB]
    assert out["peak_bytes"] == 11 * GB and out["capacity_bytes"] == 16 * GB
    # JAX cannot reset its peak: the window's is known only where the peak grew during the window.
    assert [d["window_peak_bytes"] for d in out["devices"]] == [None, 6 * GB]
    assert out["window_peak_bytes"] is None
    assert out["estimate_bytes"] == 10 * GB and out["estimate_ratio"] == pytest.approx(1.1)
    RunResult.check({"memory": out})


def test_tensorflow_devices_are_reset_around_the_window():
    experimental = FakeTfExperimental({"/device:GPU:0": 7 * GB, "/device:GPU:1": 2 * GB})

    class Tf:
        class config:
            @staticmethod
            def list_logical_devices(kind):
                return [type("D", (), {"name": n})() for n in experimental.peaks if kind in n]

    Tf.config.experimental = experimental
    meters = peak_memory.tf_meters(Tf, "gpu", 32 * GB)
    tracker = peak_memory.Tracker(meters_for=lambda backend: meters)
    events(tracker)
    out = tracker.summary(estimate_bytes=4 * GB)
    assert experimental.resets == ["/device:GPU:0", "/device:GPU:1"]
    assert [d["peak_bytes"] for d in out["devices"]] == [7 * GB, 2 * GB]  # the run's: before the window
    assert [d["window_peak_bytes"] for d in out["devices"]] == [GB, GB]  # after the reset
    assert out["peak_bytes"] == 9 * GB and out["window_peak_bytes"] == 2 * GB
    assert out["capacity_bytes"] == 32 * GB and out["source"] == peak_memory.TF_SOURCE


def test_a_run_that_never_measured_has_no_memory_record_and_a_cpu_run_reads_its_process():
    tracker = peak_memory.Tracker(meters_for=lambda backend: [])
    assert tracker.summary(1.0) is None
    events(tracker)
    out = tracker.summary(estimate_bytes=2 * GB, host_capacity=25 * GB)
    assert out["kind"] == "host" and out["devices"] == [] and out["capacity_bytes"] == 25 * GB
    assert out["peak_bytes"] == out["host_peak_bytes"] >= host.process_rss() * 0.5
    assert out["estimate_ratio"] == pytest.approx(out["peak_bytes"] / (2 * GB))


RECORD = {
    "kind": "host",
    "source": "VmHWM",
    "peak_bytes": 900_000_000,
    "window_peak_bytes": 880_000_000,
    "capacity_bytes": 25 * GB,
    "devices": [],
    "host_peak_bytes": 900_000_000,
    "estimate_bytes": 1_250_000_000,
    "estimate_ratio": 0.72,
}


SPEC = {"model": "conv2d", "batch_size": 8, "backend": "tensorflow", "precision": "float32", "data": "synthetic"}


@pytest.mark.parametrize(
    "bad,field",
    [
        ({"peak_bytes": -1}, "result.memory.peak_bytes"),
        ({"peak_bytes": 1.5}, "result.memory.peak_bytes"),
        ({"estimate_ratio": "x"}, "result.memory.estimate_ratio"),
        ({"kind": "disk"}, "result.memory.kind"),
        ({"devices": [{"name": "gpu:0", "peak_bytes": -5}]}, "result.memory.devices[0].peak_bytes"),
        ({"devices": [{"name": "gpu:0", "owner": "x"}]}, "result.memory.devices[0]"),
        ({"bytes": 1}, "result.memory.bytes"),
        ({"estimate_ratio": 3.0}, "result.memory.estimate_ratio"),
    ],
)
def test_import_checks_the_memory_record(bad, field):
    validate.check_result({"memory": RECORD})
    validate.check_agreement("done", SPEC, {"memory": RECORD})
    with pytest.raises(validate.InvalidField) as refused:
        memory_record = {**RECORD, **bad}
        validate.check_result({"memory": memory_record})
        validate.check_agreement("done", SPEC, {"memory": memory_record})
    assert str(refused.value).startswith(field + ":"), refused.value


def test_the_memory_record_is_said_in_words():
    result = RunResult(model="conv2d", memory=RECORD)
    assert RunResult.from_dict(result.to_dict()).memory == RECORD
    assert "memory" not in RunResult(model="conv2d").to_dict()  # older results stay as they were
    value, detail = result.memory_text()
    assert value == "0.90 GB"
    assert detail == "process peak (resident); measured window 0.88 GB; 0.72× the estimate 1.25 GB; of 25.00 GB"
    assert "peak memory: 0.90 GB" in result.describe()


def run_peak(backend: str, batch: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", host.BUDGET_ENV)}
    env["DASHBENCH_CPU_PROBE_SIZE"] = "256"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dashbench",
            "run",
            "--model",
            "conv2d",
            "--batch-size",
            str(batch),
            "--image-size",
            "32",
            "--width",
            "16",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--device",
            "cpu",
            "--backend",
            backend,
            "--no-store",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)["memory"]


def check_host_record(record):
    assert record["kind"] == "host" and record["peak_bytes"] > 100e6
    assert record["estimate_bytes"] > 0 and record["estimate_ratio"] > 0
    assert 0 < record["window_peak_bytes"] <= record["peak_bytes"]


def test_a_jax_cpu_run_records_its_peak():
    """The tracker on the JAX loop's events. The host's figure (VmHWM) and the estimate are the same code
    for both backends: that it grows with the batch is the TensorFlow test's, one JAX process fewer (~7 s)."""
    check_host_record(run_peak("jax", 2048))


def test_a_cpu_run_records_its_peak_and_it_grows_with_the_batch():
    small, big = run_peak("tensorflow", 4), run_peak("tensorflow", 2048)
    for record in (small, big):
        check_host_record(record)
    # 2044 more examples of 32×32×3 inputs and 16×16×16 activations: ~100 MB or more in float32
    assert big["peak_bytes"] > small["peak_bytes"] + 50e6, (small, big)
    assert big["estimate_bytes"] > small["estimate_bytes"]
