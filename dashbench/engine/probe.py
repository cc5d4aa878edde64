"""The matmul probe: the attainable TFLOP/s of one device, on any backend (Backend.matmul). The engine's CPU peak
(MFU and the above-peak flag on a CPU) and `dashbench doctor`'s probes per precision are this one
measurement."""

from __future__ import annotations

import time
from typing import Optional

from dashbench.engine import calibration, frameworks
from dashbench.engine.frameworks import CPU_PROBE_REPEATS


def matmul_tflops(backend: str, kind: str, dtype: str, size: int, repeats: int = 3) -> float:
    """Best of `repeats` timed size² products on this host's first device of `kind`, after one
    warm-up (TFLOP/s). Fetching a scalar of the product waits for it."""
    from dashbench.engine import backends

    fetch = backends.get(backend).matmul(kind, dtype, size)
    fetch()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fetch()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best / 1e12


_cpu_peaks: dict[tuple, float] = {}


def cpu_peak_tflops(
    backend: str, dtype: str = "float32", size: Optional[int] = None, repeats: int = CPU_PROBE_REPEATS
) -> float:
    """The CPU peak a run's MFU uses: this host's calibrated peak (dashbench.engine.calibration) when
    given, else the backend's own probe, cached per process (the host does not change between runs,
    and the probe costs seconds)."""
    calibrated = calibration.cpu_peak(dtype)
    if calibrated is not None:  # the host's calibration (doctor, or a quiet probe): no probe under load
        return calibrated
    key = (backend, dtype, size or frameworks.CPU_PROBE_SIZE, repeats)
    if key not in _cpu_peaks:
        _cpu_peaks[key] = matmul_tflops(backend, "cpu", dtype, key[2], repeats)
    return _cpu_peaks[key]


def probed(backend: str) -> dict[str, float]:
    """The CPU peaks this process probed with `backend`, per dtype: what a run that was handed no peak
    measured against (the runner keeps a host's first one as its provisional peak)."""
    return {dtype: value for (name, dtype, _, _), value in _cpu_peaks.items() if name == backend}
