"""A run's measured peak memory: watched from the engine's events, so both backends' loops stay as
they are. At the measured window's start the peaks so far are noted and the counters reset; at each
measured sample the window's peak is read (before anything after the window, such as the CPU probe,
can raise it).

- CPU: the process's peak resident memory (VmHWM; reset for the window by writing 5 to
  /proc/self/clear_refs, the kernel's documented way to reset it).
- GPU/TPU under TensorFlow: tf.config.experimental.get_memory_info(device)["peak"], with
  reset_memory_stats(device) at the window's start; the device's memory from nvidia-smi or the TPU's
  datasheet row (dashbench.workloads.memory).
- GPU/TPU under JAX: device.memory_stats()["peak_bytes_in_use"] and ["bytes_limit"]; JAX cannot reset
  its peak, so its window peak is the run's when the peak grew during the window, else not known.

The framework is only looked up where the run already imported it (sys.modules): nothing is started here.
"""

from __future__ import annotations

from typing import Any, Optional

from dashbench.hardware import host
from dashbench.workloads import memory

HOST_SOURCE = "VmHWM (peak resident memory of the run process)"
TF_SOURCE = "tf.config.experimental.get_memory_info"
JAX_SOURCE = "jax device.memory_stats"


def host_peak() -> Optional[float]:
    """The run process's peak resident memory so far (VmHWM), in bytes."""
    return host.status_bytes("VmHWM:")


def reset_host_peak() -> bool:
    """Reset VmHWM to the current resident memory; False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


class TfMeter:
    """One TensorFlow device's peak (get_memory_info / reset_memory_stats)."""

    source = TF_SOURCE

    def __init__(self, experimental, name: str, capacity: Optional[float]):
        self.experimental, self.name, self.capacity = experimental, name, capacity
        self.resettable = True

    def peak(self) -> Optional[float]:
        try:
            return float(self.experimental.get_memory_info(self.name)["peak"])
        except Exception:  # a device that does not keep the figure: not known, never a lost run
            return None

    def reset(self) -> bool:
        try:
            self.experimental.reset_memory_stats(self.name)
            return True
        except Exception:
            return False


class JaxMeter:
    """One JAX device's peak (memory_stats; no reset)."""

    source = JAX_SOURCE

    def __init__(self, device):
        self.device = device
        self.name = f"{getattr(device, 'platform', 'device')}:{getattr(device, 'id', 0)}"
        stats = self._stats()
        self.capacity = float(stats["bytes_limit"]) if _number(stats.get("bytes_limit")) else None

    def _stats(self) -> dict:
        try:
            stats = self.device.memory_stats()
        except Exception:
            return {}
        return stats if isinstance(stats, dict) else {}

    def peak(self) -> Optional[float]:
        value = self._stats().get("peak_bytes_in_use")
        return float(value) if _number(value) else None

    def reset(self) -> bool:
        return False


def tf_meters(tf, kind: str, capacity: Optional[float]) -> list:
    """Meters of the run's GPUs or TPUs (kind), as TensorFlow names them."""
    try:
        names = [d.name for d in tf.config.list_logical_devices(kind.upper())]
    except Exception:
        return []
    return [TfMeter(tf.config.experimental, name, capacity) for name in names]


def jax_meters(devices) -> list:
    """Meters of the accelerators among JAX's local devices (a CPU device keeps no stats)."""
    return [JaxMeter(d) for d in devices if getattr(d, "platform", "cpu") != "cpu"]


def device_capacity(kind: str) -> Optional[float]:
    """The memory of one device where known without the framework: nvidia-smi's total, a TPU's HBM."""
    if kind == "gpu":
        return host.gpu_total_memory()
    if kind == "tpu":
        from dashbench.core.spec import RunSpec

        return memory.tpu_memory(RunSpec(model="conv2d", batch_size=1, device="tpu"))[0]
    return None


def framework_meters(backend: str) -> list:
    """The meters of the accelerators the run's framework (already imported) sees; [] on a CPU."""
    from dashbench.engine import backends

    return backends.get(backend).memory_meters()


class Tracker:
    """Watches a run's events (call it with each); `summary()` is the result's `memory` record."""

    def __init__(self, meters_for=framework_meters):
        self.meters_for = meters_for
        self.meters: Optional[list] = None
        self.host_before = self.host_window = None
        self.host_reset = False
        self.before: list[Optional[float]] = []
        self.window: list[Optional[float]] = []
        self.reset: list[bool] = []
        self.backend = "tensorflow"

    def watching(self, on_event):
        def watch(event: dict) -> None:
            self(event)
            if on_event is not None:
                on_event(event)

        return watch

    def __call__(self, event: dict) -> None:
        kind = event.get("event")
        try:
            if kind == "phase" and event.get("phase") == "measure":
                self.start_window()
            elif kind == "sample" and not event.get("warmup") and self.meters is not None:
                self.read_window()
        except Exception:  # a figure not read is a figure missing, never a run lost
            pass

    def start_window(self) -> None:
        self.meters = self.meters_for(self.backend)
        self.before = [meter.peak() for meter in self.meters]
        self.reset = [meter.reset() for meter in self.meters]
        self.host_before = host_peak()
        self.host_reset = reset_host_peak()
        self.read_window()

    def read_window(self) -> None:
        self.window = [meter.peak() for meter in self.meters or []]
        self.host_window = host_peak()

    def summary(
        self,
        estimate_bytes: Optional[float] = None,
        host_capacity: Optional[float] = None,
        estimate_source: Optional[str] = None,
    ) -> Optional[dict]:
        """The run's peaks: over the run (up to the window's end) and over the measured window,
        per device and summed on an accelerator, the process's on a CPU; with the device's memory,
        the estimate (bytes, for what `peak_bytes` counts), where it came from, and peak / estimate."""
        if self.meters is None:  # the run never reached its measured window
            return None
        host_run = _max(self.host_before, self.host_window)
        host_window = self.host_window if self.host_reset else None
        out: dict[str, Any] = {}
        if self.meters:
            devices = []
            for meter, before, window, reset in zip(self.meters, self.before, self.window, self.reset):
                run_peak = _max(before, window)
                # Without a reset, the window's peak is the run's only when the peak grew in the window.
                in_window = (
                    window if reset else (window if _number(window) and _number(before) and window > before else None)
                )
                devices.append(
                    {
                        "name": meter.name,
                        "peak_bytes": _int(run_peak),
                        "window_peak_bytes": _int(in_window),
                        "capacity_bytes": _int(meter.capacity),
                    }
                )
            out.update(
                kind="device",
                source=self.meters[0].source,
                peak_bytes=_sum(d["peak_bytes"] for d in devices),
                window_peak_bytes=_sum(d["window_peak_bytes"] for d in devices),
                capacity_bytes=_int(next((m.capacity for m in self.meters if _number(m.capacity)), None)),
                devices=devices,
            )
        else:
            out.update(
                kind="host",
                source=HOST_SOURCE,
                peak_bytes=_int(host_run),
                window_peak_bytes=_int(host_window),
                capacity_bytes=_int(host_capacity),
                devices=[],
            )
        out["host_peak_bytes"] = _int(host_run)
        out["estimate_bytes"] = _int(estimate_bytes)
        out["estimate_source"] = estimate_source if _number(estimate_bytes) else None
        ok = _number(out["peak_bytes"]) and _number(estimate_bytes) and estimate_bytes > 0
        out["estimate_ratio"] = out["peak_bytes"] / estimate_bytes if ok else None
        return out


def run_estimate(spec, devices: int) -> tuple[Optional[float], Optional[str]]:
    """The estimate of what `peak_bytes` counts: the process (CPU) or all devices together (each
    holds the weights and its share of the batch, as memory.check counts it), and its source
    (memory.SOURCES: XLA's analysis of the compiled step, or the counts)."""
    try:
        if devices > 1:
            share = memory.estimate(spec.replace(batch_size=-(-spec.batch_size // devices), replicas=None))
            return share.total * devices, share.source
        need = memory.estimate(spec)
        return need.total, need.source
    except Exception:
        return None, None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _int(value) -> Optional[int]:
    return int(value) if _number(value) else None


def _max(*values) -> Optional[float]:
    known = [v for v in values if _number(v)]
    return max(known) if known else None


def _sum(values) -> Optional[int]:
    values = list(values)
    return int(sum(values)) if values and all(_number(v) for v in values) else None
