"""What the rest of the machine did while a run measured, so a figure from a busy machine says so.

CPU: the machine's busy time from /proc/stat against this process's own CPU time over the measured
window; what is left is other processes' work, in cores. GPU: other processes on the run's GPUs,
from NVML where it is installed. A machine without /proc (macOS) gives no CPU figure, not a guess.
"""

from __future__ import annotations

import os
import time
from typing import Optional

PROC_STAT = "/proc/stat"


def _machine_busy_s() -> Optional[float]:
    """CPU seconds all cores spent busy since boot (everything but idle and iowait)."""
    try:
        with open(PROC_STAT) as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    ticks = [int(value) for value in fields[1:9]]  # user nice system idle iowait irq softirq steal
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


class Window:
    """Opened when measuring starts, closed when it ends: `close()` is the record of the window."""

    def __init__(self, gpu_indices: tuple[int, ...] = ()):
        self.gpu_indices = gpu_indices
        self.start = (time.monotonic(), _machine_busy_s(), _own_cpu_s())

    def close(self) -> dict:
        wall0, busy0, own0 = self.start
        wall = time.monotonic() - wall0
        busy1, own = _machine_busy_s(), _own_cpu_s() - own0
        record: dict = {"cores": os.cpu_count(), "window_s": round(wall, 3)}
        if busy0 is not None and busy1 is not None and wall > 0:
            # Tick counts are coarse (10 ms): a short window can read a little below zero.
            record["own_cores"] = round(own / wall, 3)
            record["other_cores"] = round(max(0.0, (busy1 - busy0 - own) / wall), 3)
        others = _gpu_other_processes(self.gpu_indices)
        if others is not None:
            record["gpu_other_processes"] = others
        return record


def _gpu_other_processes(indices: tuple[int, ...]) -> Optional[int]:
    """Processes other than this one on the given GPUs (NVML), or None where NVML is not installed."""
    if not indices:
        return None
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        pids = set()
        for index in indices:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                pids.add(process.pid)
        pids.discard(os.getpid())
        return len(pids)
    except Exception:  # NVML present but unusable (no driver): no figure rather than a failed run
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
