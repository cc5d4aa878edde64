"""The matmul probe: the attainable TFLOP/s of one device (Backend.matmul for an accelerator, numpy's BLAS
for every backend's CPU). The engine's CPU peak
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

    return _best_tflops(backends.get(backend).matmul(kind, dtype, size), size, repeats)


def _best_tflops(fetch, size: int, repeats: int) -> float:
    """The TFLOP/s of the fastest of `repeats` calls of `fetch` (one size² product each), after one warm-up."""
    fetch()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fetch()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best / 1e12


# The one library every backend's CPU peak is probed with: the same host and precision get the same
# denominator under TensorFlow and under JAX (each framework's own probe, taken at its own moment on
# a shared machine, gave this CPU 0.280 and 0.120 TFLOP/s). Its name keys the store's first probe.
CPU_PROBE = "numpy"
# The dtype a CPU's peak is probed in, for every precision: numpy's BLAS multiplies float32 (no
# bfloat16), and Keras's mixed precision on a CPU gains little over it.
CPU_PROBE_DTYPE = "float32"

_cpu_peaks: dict[tuple, float] = {}


def cpu_matmul_tflops(size: int, repeats: int = CPU_PROBE_REPEATS) -> float:
    """Best of `repeats` timed float32 size² products with numpy's BLAS, after one warm-up (TFLOP/s):
    this host's attainable CPU rate, whichever framework a run uses."""
    import numpy as np

    rng = np.random.default_rng(1)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)

    return _best_tflops(lambda: float(np.matmul(a, b)[0, 0]), size, repeats)


def cpu_peak_tflops(
    backend: str, dtype: str = "float32", size: Optional[int] = None, repeats: int = CPU_PROBE_REPEATS
) -> float:
    """The CPU peak a run's MFU uses, for any backend and precision: this host's calibrated peak
    (dashbench.engine.calibration) when given, else the one CPU probe (cpu_matmul_tflops), cached per
    process (the host does not change between runs, and the probe costs seconds). `backend` is kept
    for the callers' signature; the peak no longer depends on it."""
    calibrated = calibration.cpu_peak(CPU_PROBE_DTYPE)
    if calibrated is not None:  # the host's calibration (doctor, or a quiet probe): no probe under load
        return calibrated
    key = (CPU_PROBE, CPU_PROBE_DTYPE, size or frameworks.CPU_PROBE_SIZE, repeats)
    if key not in _cpu_peaks:
        _cpu_peaks[key] = cpu_matmul_tflops(key[2], repeats)
    return _cpu_peaks[key]


def probed(backend: str = CPU_PROBE) -> dict[str, float]:
    """The CPU peaks this process probed, per dtype: what a run that was handed no peak measured
    against (the runner keeps a host's first one as its provisional peak, under CPU_PROBE)."""
    return {dtype: value for (name, dtype, _, _), value in _cpu_peaks.items() if name == CPU_PROBE}
