"""A CPU peak calibrated on this host, handed to the engine by the process that starts it.

A CPU's peak for MFU was a matmul probe inside every run — under the same load as the run, so a busy
machine gave a low peak and an MFU above 100% that no flag caught. When the host has a calibration
(`dashbench doctor`, a probe on a quiet machine), the run process (dashbench.jobs.runner, which has
the store) puts its best peaks in CPU_PEAKS_ENV as JSON ({"float32": TFLOP/s, "bfloat16": …}); the
engine then uses them instead of probing, with peak_source "calibrated" and a hard above-peak margin
of 1.0. No store here, and no framework.

Before a host has a calibration, its runs share the first CPU probe taken there (the runner keeps it
in the store): the runner then sets CPU_PEAK_SOURCE_ENV to "provisional", with that probe in
CPU_PEAKS_ENV once there is one; the engine probes only for the first run, and either way the peak
keeps the probe's soft margin and is labelled peak_source "provisional".
"""

from __future__ import annotations

import json
import math
import os
from typing import Optional

from dashbench.hardware.peaks import PROVISIONAL

CPU_PEAKS_ENV = "DASHBENCH_CPU_PEAKS"
CPU_PEAK_SOURCE_ENV = "DASHBENCH_CPU_PEAK_SOURCE"  # "provisional", or unset: calibrated
SOURCE = "calibrated"
MARGIN = 1.0  # a calibrated peak is the best this host reached: any figure above it is flagged


def cpu_peaks(environ=os.environ) -> dict[str, float]:
    """The calibrated per-host CPU peaks by dtype, or {} (none given, or unreadable)."""
    text = environ.get(CPU_PEAKS_ENV)
    if not text:
        return {}
    try:
        raw = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    return {
        str(k): float(v)
        for k, v in raw.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    }


def cpu_peak(dtype: str, environ=os.environ) -> Optional[float]:
    """The calibrated peak for `dtype` (the float32 one where that dtype was not calibrated, since
    the engine takes the larger of the two), or None when the host has no calibration."""
    found = cpu_peaks(environ)
    return found.get(dtype, found.get("float32"))


def provisional(environ=os.environ) -> bool:
    """Is the CPU peak the host's first probe (no calibration yet), rather than a calibrated one?"""
    return environ.get(CPU_PEAK_SOURCE_ENV) == PROVISIONAL


def applied(target, peak: tuple) -> tuple:
    """measured.peak's (TFLOP/s, source, margin), with the source (and, when calibrated, the hard
    margin) of a CPU peak the run was handed."""
    if target.kind == "cpu" and peak[0] is not None and provisional():
        return peak[0], PROVISIONAL, peak[2]  # still a probe: its soft margin stays
    if target.kind == "cpu" and cpu_peaks() and peak[0] is not None:
        return peak[0], SOURCE, MARGIN
    return peak
