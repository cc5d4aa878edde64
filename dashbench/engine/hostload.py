"""What the rest of the machine did while a run measured, so a figure from a busy machine says so.

CPU: the machine's busy time from /proc/stat against this process's own CPU time over the measured
window; what is left is other processes' work, in cores. GPU: other processes on the run's GPUs,
from NVML where it is installed. A machine without /proc (macOS) gives no CPU figure, not a guess.

/proc/stat counts in clock ticks (USER_HZ, 100 a second), and each core adds its ticks at its own
timer interrupt, so two readings a few milliseconds apart can differ by a whole tick per core or
none: a 0.004 s window once read "other processes used 3.8 of 2 cores". Below MIN_WINDOW_TICKS ticks
of wall time (0.5 s at 100 Hz) the window gives no CPU figure, only a note that it was too short; a
longer one has its figures held to what the host has (0 to `cores`), since the last tick's edge
still blurs them a little.
"""

from __future__ import annotations

import os
import time
from typing import Callable, Optional

PROC_STAT = "/proc/stat"
# The shortest window a CPU figure is taken from, in clock ticks of wall time: the error of a tick
# per core at each end is then at most 4% of the cores (2/50).
MIN_WINDOW_TICKS = 50
TOO_SHORT = "window too short to measure"


def _clock_ticks_per_s() -> int:
    return os.sysconf("SC_CLK_TCK")


def min_window_s() -> float:
    """The shortest measured window that gives a CPU figure (MIN_WINDOW_TICKS clock ticks)."""
    return MIN_WINDOW_TICKS / _clock_ticks_per_s()


def _stat_line() -> Optional[str]:
    """The first line of /proc/stat (all cores together), or None where there is none."""
    try:
        with open(PROC_STAT) as handle:
            return handle.readline()
    except OSError:
        return None


def _machine_busy_s(line: Optional[str]) -> Optional[float]:
    """CPU seconds all cores spent busy since boot (everything but idle and iowait), from /proc/stat's
    first line."""
    fields = (line or "").split()
    if not fields or fields[0] != "cpu":
        return None
    try:
        ticks = [int(value) for value in fields[1:9]]  # user nice system idle iowait irq softirq steal
    except ValueError:
        return None
    if len(ticks) < 5:
        return None
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / _clock_ticks_per_s()


def _own_cpu_s() -> float:
    times = os.times()
    return times.user + times.system


def reading() -> tuple[float, Optional[str], float]:
    """(monotonic seconds, /proc/stat's first line or None, this process's CPU seconds): one end of a window."""
    return time.monotonic(), _stat_line(), _own_cpu_s()


class Window:
    """Opened when measuring starts, closed when it ends: `close()` is the record of the window."""

    def __init__(
        self, gpu_indices: tuple[int, ...] = (), read: Callable[[], tuple[float, Optional[str], float]] = reading
    ):
        """`read`: one end of the window (reading()); tests give fabricated /proc/stat lines."""
        self.gpu_indices, self.read = gpu_indices, read
        self.start = read()

    def close(self) -> dict:
        (wall0, line0, own0), (wall1, line1, own1) = self.start, self.read()
        wall = wall1 - wall0
        busy0, busy1 = _machine_busy_s(line0), _machine_busy_s(line1)
        cores = os.cpu_count() or 1
        record: dict = {"cores": cores, "window_s": round(wall, 3)}
        if busy0 is not None and busy1 is not None:
            if wall < min_window_s():
                record["note"] = f"{TOO_SHORT} ({wall:.2g} s; it takes {min_window_s():g} s)"
            else:
                own = own1 - own0
                record["own_cores"] = round(_held(own / wall, cores), 3)
                record["other_cores"] = round(_held((busy1 - busy0 - own) / wall, cores), 3)
        others = _gpu_other_processes(self.gpu_indices)
        if others is not None:
            record["gpu_other_processes"] = others
        return record


def _held(cores_used: float, cores: int) -> float:
    """A figure from tick counts, held to what the host has: the ticks at a window's edges can put
    it a little below zero or above the host's cores."""
    return min(max(cores_used, 0.0), float(cores))


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
