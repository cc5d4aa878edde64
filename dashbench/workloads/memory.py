"""How much memory a run needs against what its devices have (the host's figures: dashbench.hardware.host):
checked before a run is launched, and watched while it runs (dashbench.jobs.run_guard). No TensorFlow here.

The estimate is analytic, from each workload's counts (dashbench.workloads.registry): parameters, their gradients and
the optimizer's slots (Adam 2, momentum SGD 1), the synthetic batch (held twice: numpy and the
framework's copy), the activations of one example times the global batch (counted in float32,
whatever the precision, and 1.5 times for the backward pass's transient gradients: 2 to 3.5 times
for JAX on the CPU), plus fixed allowances for the framework itself and the graph it builds for the
model. It aims high (float32 activations under mixed precision, every kept tensor counted), so a
refused run would not have fit; bench/memory_estimate.py sets it beside real runs' peak memory
(docs/MEMORY.md). It is an estimate, which is why the guard in the run process watches the real
figure too.
"""

from __future__ import annotations

from typing import Optional

from dashbench.core.spec import RunSpec, SpecError
from dashbench.hardware import host, peaks, tpu
from dashbench.workloads.memory_estimate import (
    ACCELERATOR_MARGIN,
    FLOAT,
    FRAMEWORK_BYTES,
    GIB,
    SOURCES,
    WARN_FRACTION,
    counts,
    estimable,
    estimate,
    on_host_cpu,
)


def device_memory(spec: RunSpec) -> tuple[Optional[float], str, int]:
    """(bytes available to each device of the run, what that is, devices the batch is split over):
    the host's MemAvailable for a CPU run (and for `auto` on a host with no accelerator), the least
    free memory of the GPUs used (nvidia-smi) for a GPU run, a TPU device's share of its chip's HBM
    (from the VM's accelerator type and data/hardware.csv) for a TPU run; None where it is not known
    without the framework."""
    if on_host_cpu(spec):
        available, _bound = host.host_budget(spec.backend)
        return available, "the host", 1
    if spec.device in ("gpu", "auto"):
        free = host.gpu_free_memory()
        if free:
            used = free[: spec.replicas or len(free)]
            return min(used), ("the GPU" if len(used) == 1 else f"each of the {len(used)} GPUs"), len(used)
    if spec.device == "tpu" or (spec.device == "auto" and tpu.evidence()):
        return tpu_memory(spec)
    return None, spec.device, 1


def tpu_memory(spec: RunSpec) -> tuple[Optional[float], str, int]:
    """A TPU device's HBM and the devices of the slice (or the first --replicas of them); (None, …)
    when the accelerator type or its memory is not known."""
    typed = tpu.parse(tpu.accelerator_type()[0])
    row = peaks.table().get(typed.name) if typed.generation else None
    if row is None or not row.get("memory_gb"):
        return None, "the TPU", 1
    generation = tpu.GENERATIONS[typed.generation]
    per_device = row["memory_gb"] * GIB / generation.devices_per_chip
    devices = (typed.chips or 1) * generation.devices_per_chip
    devices = min(devices, spec.replicas) if spec.replicas else devices
    what = f"{typed.name} ({typed.raw})"
    return per_device, (f"each of the {devices} devices of the {what}" if devices > 1 else f"the {what}"), devices


def check(spec: RunSpec, available: Optional[float] = None) -> Optional[str]:
    """Refuse a run whose estimate exceeds the memory available to it (an accelerator's: past
    ACCELERATOR_MARGIN times it): SpecError naming batch_size, with the estimate, what is available,
    and the largest batch that fits. Returns a one-line warning when the estimate passes
    WARN_FRACTION of it, else None. An accelerator run's batch, made on the host, is checked against
    the host's memory too. A user's model not built in this process has no estimate here (None)."""
    if not estimable(spec):
        return None
    where, devices, bound = "the host", 1, ""
    if available is None:
        available, where, devices = device_memory(spec)
        if where != "the host":
            _check_host_side(spec)
        else:
            bound = host.host_budget(spec.backend)[1]
    if available is None:
        return None
    accelerator = where != "the host"
    if bound:  # which of the host's bounds is the least, and so the one that counts
        where += f" (bound: {bound})"
    # Data parallel over devices: each holds the weights and its share of the batch.
    need = estimate(spec.replace(batch_size=-(-spec.batch_size // devices), replicas=None) if devices > 1 else spec)
    room = available * (ACCELERATOR_MARGIN if accelerator else 1.0)
    each = " on each device" if devices > 1 else ""
    said = "estimate" if need.source == "counts" else f"estimate: {SOURCES[need.source]}"
    if need.total > room:
        fits = need.max_batch(room) * devices
        hint = f"a batch of at most ~{fits} would fit" if fits else "no batch size fits at these shapes"
        if accelerator:
            hint += f" (the estimate errs high on accelerators: refused past {ACCELERATOR_MARGIN:g}× memory)"
        raise SpecError(
            "batch_size" if fits else "memory",  # a model no batch size makes fit is too big, whatever the batch
            f"{spec.model} at batch {spec.batch_size} needs about {host.gb(need.total)} of "
            f"memory{each} ({said}) but {where} has {host.gb(available)} available; {hint}",
        )
    if need.total > WARN_FRACTION * available:
        share = need.total / available
        text = (
            f"{spec.model} at batch {spec.batch_size} needs about {host.gb(need.total)} of memory{each} ({said}), "
            f"{share:.0%} of the {host.gb(available)} {where} has available"
        )
        if accelerator:
            text += (
                "; the estimate counts activations in float32 and unfused, so it may well fit: if not, the "
                "run fails with the framework's out-of-memory error"
            )
        return text
    return None


def _check_host_side(spec: RunSpec) -> None:
    """An accelerator run's synthetic batch is made in the host's memory (twice: numpy and the
    framework's copy) before it is put on the devices: refused when that cannot fit the host."""
    available, _bound = host.host_budget(spec.backend)
    if available is None:
        return
    _params, _activations, inputs = counts(spec)
    need = FRAMEWORK_BYTES + 2 * inputs * FLOAT * spec.batch_size
    if need > available:
        fits = max(0, int((available - FRAMEWORK_BYTES) // (2 * inputs * FLOAT)))
        raise SpecError(
            "batch_size",
            f"{spec.model} at batch {spec.batch_size} needs about {host.gb(need)} of host "
            f"memory for its input batch (estimate) but the host has {host.gb(available)} "
            f"available; a batch of at most ~{fits} would fit",
        )


# -- a run's measured peak as table columns (list, Compare and its CSV) ------------------------------

# Bytes as measured (engine/peak_memory.py, RunResult.memory), and the peak over the pre-run estimate.
MEMORY_COLUMNS = {
    "peak_memory_bytes": "peak_bytes",
    "window_peak_memory_bytes": "window_peak_bytes",
    "memory_capacity_bytes": "capacity_bytes",
    "memory_estimate_bytes": "estimate_bytes",
    "memory_estimate_ratio": "estimate_ratio",
}


def memory_columns(results) -> dict[str, list]:
    """MEMORY_COLUMNS for each of `results` (RunResults or None), None where not measured."""
    out: dict[str, list] = {name: [] for name in MEMORY_COLUMNS}
    for result in results:
        record = getattr(result, "memory", None)
        record = record if isinstance(record, dict) else {}
        for name, key in MEMORY_COLUMNS.items():
            value = record.get(key)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
            out[name].append(value if ok else None)
    return out
