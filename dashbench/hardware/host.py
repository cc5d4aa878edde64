"""What this host has and allows, read without a framework: its free and total memory (/proc/meminfo),
its cgroup's memory limit, use and OOM kills, the process's rlimits, a process's resident memory
(/proc/PID/status) and the NVIDIA GPUs' memory (nvidia-smi). The pre-run memory check
(dashbench.workloads.memory) and the run's watch (dashbench.jobs.run_guard) read these."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Optional

GB = 1e9  # as the messages say memory: decimal gigabytes


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
            out.append((name, float(soft), status_bytes(status_key)))
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


def status_bytes(key: str, pid: int | str = "self") -> Optional[float]:
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
    return status_bytes("VmRSS:", pid)


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


def gb(value: float) -> str:
    return f"{value / GB:,.1f} GB" if value >= 0.1 * GB else f"{value / 1e6:,.0f} MB"


def env_float(name: str, default: float) -> float:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        return float(text)
    except ValueError:
        return default
