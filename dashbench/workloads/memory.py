"""How much memory a run needs, and how much the host has: checked before a run is launched, and
watched while it runs (dashbench.jobs.run_guard). No TensorFlow here.

The estimate is analytic, from the shapes in dashbench.workloads.catalog: parameters, their gradients and
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

import os
import shutil
import subprocess
from typing import Optional

from dashbench.core.spec import RunSpec, SpecError
from dashbench.hardware import peaks, tpu

# The estimate's names, for the callers that read them here beside the check.
from dashbench.workloads.memory_estimate import (  # noqa: F401
    ACCELERATOR_MARGIN,
    APPLICATIONS,
    APPLICATIONS_GRAPH_BYTES,
    BACKWARD_FACTOR,
    BILSTM_EMBEDDING,
    COMPILED_STEPS,
    FLOAT,
    FRAMEWORK_BYTES,
    GB,
    GIB,
    LSTM_WEIGHT_COPIES,
    OPTIMIZER_SLOTS,
    SOURCES,
    USER_MODEL_FACTS,
    WARN_FRACTION,
    XLA_CPU_BACKWARD_FACTOR,
    XLA_CPU_BACKWARD_FACTORS,
    Estimate,
    _compiled_estimate,
    _counts,
    _graph_bytes,
    _has_accelerator,
    _lstm_params,
    estimable,
    estimate,
    know,
    know_compiled,
    on_host_cpu,
    step_key,
)


def host_memory() -> tuple[Optional[float], Optional[float]]:
    """(MemAvailable, MemTotal) of this host in bytes, from /proc/meminfo; (None, None) elsewhere."""
    try:
        with open("/proc/meminfo") as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
        available = int(fields["MemAvailable"].split()[0]) * 1024
        total = int(fields["MemTotal"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None, None
    return float(available), float(total)


# A limit this large (cgroup v1's "no limit" is 2**63 rounded down to a page) bounds nothing.
NO_LIMIT = 2**60
BUDGET_ENV = "DASHBENCH_MEMORY_BUDGET_GB"  # a smaller budget by hand (a shared host, a test's cap)
# RLIMIT_AS bounds address space, not resident memory: a framework maps this much beyond what the
# estimate counts (a run's VmPeak less its estimate, conv2d on this CPU at batch 8 and 1000: TensorFlow
# 1.1-1.2 GB, JAX 1.6-1.9 GB). Past the limit TensorFlow segfaults rather than raise (fashion_mnist-like
# conv2d at 4000 under --as=3.5e9), so the room under RLIMIT_AS is counted without it.
ADDRESS_SPACE_EXTRA = {"tensorflow": 1.5 * GB, "jax": 2.25 * GB}


def host_budget(backend: Optional[str] = None) -> tuple[Optional[float], str]:
    """(bytes a run on this host may use, which bound that is): the least of the host's free memory
    (MemAvailable), the room under the cgroup's memory.max (v2; v1 memory.limit_in_bytes), the room
    under the process's RLIMIT_AS (less ADDRESS_SPACE_EXTRA for `backend`, the largest when None) and
    RLIMIT_DATA, and DASHBENCH_MEMORY_BUDGET_GB; (None, "") when none is known."""
    available, _total = host_memory()
    bounds = [(available, "its free memory, MemAvailable"), cgroup_room(), *rlimit_rooms(backend)]
    budget = env_float(BUDGET_ENV, 0.0)
    if budget > 0:
        bounds.append((budget * GB, f"{BUDGET_ENV}={budget:g}"))
    known = [(value, name) for value, name in bounds if value is not None]
    return min(known, key=lambda bound: bound[0]) if known else (None, "")


def host_capacity() -> Optional[float]:
    """The most a run on this host could hold: MemTotal, or a smaller cgroup limit or rlimit."""
    _available, total = host_memory()
    limits = [total, _cgroup_file(*CGROUP_LIMIT_FILES)]
    limits += [limit for _name, limit, _used in _rlimits()]
    known = [value for value in limits if value is not None and value < NO_LIMIT]
    return min(known) if known else None


CGROUP_LIMIT_FILES = ("memory.max", "memory.limit_in_bytes")
CGROUP_USAGE_FILES = ("memory.current", "memory.usage_in_bytes")
CGROUP_EVENT_FILES = ("memory.events", "memory.oom_control")  # both carry "oom_kill N"
CGROUP_ROOT = "/sys/fs/cgroup"


def _cgroup_dirs() -> list[str]:
    """This process's memory cgroup folders, own first (v2's unified one, then v1's memory one)."""
    try:
        with open("/proc/self/cgroup") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        _id, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            found += [os.path.join(CGROUP_ROOT, path.lstrip("/")), CGROUP_ROOT]
        elif "memory" in controllers.split(","):
            found += [os.path.join(CGROUP_ROOT, "memory", path.lstrip("/")), os.path.join(CGROUP_ROOT, "memory")]
    return found


def _cgroup_file(*names: str) -> Optional[float]:
    """The first of `names` that this process's cgroup has, as a number ("max": None)."""
    for folder in _cgroup_dirs():
        for name in names:
            try:
                with open(os.path.join(folder, name)) as handle:
                    text = handle.read().strip()
            except OSError:
                continue
            if text == "max":
                return None
            try:
                return float(text)
            except ValueError:
                return None
    return None


def cgroup_room() -> tuple[Optional[float], str]:
    """(room under the cgroup's memory limit, its name), or (None, …) with no limit set."""
    limit = _cgroup_file(*CGROUP_LIMIT_FILES)
    if limit is None or limit >= NO_LIMIT:
        return None, ""
    used = _cgroup_file(*CGROUP_USAGE_FILES) or 0.0
    return max(0.0, limit - used), f"the cgroup's memory limit, {gb(limit)} with {gb(used)} in use"


def oom_kills() -> Optional[int]:
    """The cgroup's count of processes the kernel's OOM killer ended (oom_kill), or None."""
    for folder in _cgroup_dirs():
        for name in CGROUP_EVENT_FILES:
            try:
                with open(os.path.join(folder, name)) as handle:
                    for line in handle:
                        key, _, value = line.partition(" ")
                        if key == "oom_kill":
                            return int(value)
            except (OSError, ValueError):
                continue
    return None


def _rlimits() -> list[tuple[str, float, Optional[float]]]:
    """(name, soft limit, bytes of it this process already uses) of RLIMIT_AS and RLIMIT_DATA where set."""
    import resource

    out = []
    for name, status_key in (("RLIMIT_AS", "VmSize:"), ("RLIMIT_DATA", "VmData:")):
        soft, _hard = resource.getrlimit(getattr(resource, name))
        if soft != resource.RLIM_INFINITY and soft < NO_LIMIT:
            out.append((name, float(soft), _status_bytes(status_key)))
    return out


def rlimit_rooms(backend: Optional[str] = None) -> list[tuple[float, str]]:
    out = []
    for name, limit, used in _rlimits():
        extra = ADDRESS_SPACE_EXTRA.get(backend, max(ADDRESS_SPACE_EXTRA.values())) if name == "RLIMIT_AS" else 0.0
        text = f"the process's {name}, {gb(limit)}" + (f" with {gb(used)} of it in use" if used else "")
        if extra:
            text += f", less {gb(extra)} of address space the framework maps beyond its data"
        out.append((max(0.0, limit - (used or 0.0) - extra), text))
    return out


def _status_bytes(key: str, pid: int | str = "self") -> Optional[float]:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith(key):
                    return float(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        return None
    return None


def process_rss(pid: int | str = "self") -> Optional[float]:
    """Resident memory of a process in bytes (VmRSS), or None where /proc does not say."""
    return _status_bytes("VmRSS:", pid)


def gpu_total_memory() -> Optional[float]:
    """The memory of the first NVIDIA GPU in bytes (nvidia-smi's memory.total), or None."""
    total = gpu_free_memory("memory.total")
    return total[0] if total else None


def gpu_free_memory(field: str = "memory.free") -> Optional[list[float]]:
    """Free memory of each NVIDIA GPU in bytes (nvidia-smi, in CUDA's order), or None where there is none."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        done = subprocess.run(
            ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        free = [float(line) * 2**20 for line in done.stdout.split() if line.strip()]
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return free if done.returncode == 0 and free else None


def device_memory(spec: RunSpec) -> tuple[Optional[float], str, int]:
    """(bytes available to each device of the run, what that is, devices the batch is split over):
    the host's MemAvailable for a CPU run (and for `auto` on a host with no accelerator), the least
    free memory of the GPUs used (nvidia-smi) for a GPU run, a TPU device's share of its chip's HBM
    (from the VM's accelerator type and data/peaks.csv) for a TPU run; None where it is not known
    without the framework."""
    if on_host_cpu(spec):
        available, _bound = host_budget(spec.backend)
        return available, "the host", 1
    if spec.device in ("gpu", "auto"):
        free = gpu_free_memory()
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


def gb(value: float) -> str:
    return f"{value / GB:,.1f} GB" if value >= 0.1 * GB else f"{value / 1e6:,.0f} MB"


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
            bound = host_budget(spec.backend)[1]
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
            f"{spec.model} at batch {spec.batch_size} needs about {gb(need.total)} of "
            f"memory{each} ({said}) but {where} has {gb(available)} available; {hint}",
        )
    if need.total > WARN_FRACTION * available:
        share = need.total / available
        text = (
            f"{spec.model} at batch {spec.batch_size} needs about {gb(need.total)} of memory{each} ({said}), "
            f"{share:.0%} of the {gb(available)} {where} has available"
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
    available, _bound = host_budget(spec.backend)
    if available is None:
        return
    _params, _activations, inputs = _counts(spec)
    need = FRAMEWORK_BYTES + 2 * inputs * FLOAT * spec.batch_size
    if need > available:
        fits = max(0, int((available - FRAMEWORK_BYTES) // (2 * inputs * FLOAT)))
        raise SpecError(
            "batch_size",
            f"{spec.model} at batch {spec.batch_size} needs about {gb(need)} of host "
            f"memory for its input batch (estimate) but the host has {gb(available)} "
            f"available; a batch of at most ~{fits} would fit",
        )


# -- the watchdog's limits (read by dashbench.jobs.run_guard in the run process) -----------------------


def env_float(name: str, default: float) -> float:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        return float(text)
    except ValueError:
        return default


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
