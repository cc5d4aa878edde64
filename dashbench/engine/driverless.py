"""A missing GPU or TPU told without starting TensorFlow or JAX, on a host with no GPU driver.

Neither framework can show a GPU where the operating system shows no GPU driver, nor JAX a TPU where
the host shows no TPU (dashbench.hardware.tpu.evidence), so on such a host (a CPU box, the common case of a
mistaken `--device gpu`) the refusal needs no framework start — seconds of CPU, and a TensorFlow
import pulls JAX in too. Where a driver is there, only the framework can tell: None here.
No TensorFlow or JAX here.
"""

from __future__ import annotations

import glob
import os
import sys

from dashbench.core.spec import RunSpec
from dashbench.engine import backends
from dashbench.hardware import tpu

# What a GPU driver leaves on Linux: NVIDIA's kernel module (and its device files in a container),
# WSL2's GPU paravirtualisation, AMD's ROCm.
GPU_DRIVER_SIGNS = ("/proc/driver/nvidia", "/dev/nvidia[0-9]*", "/dev/dxg", "/dev/kfd")
NO_DRIVER = "no GPU driver on this host: no " + ", ".join(GPU_DRIVER_SIGNS[:-1]) + " or " + GPU_DRIVER_SIGNS[-1]


def gpu_driver() -> str | None:
    """The first sign of a GPU driver on this host (a path), or None. Off Linux the signs are unknown (a Mac's
    Metal GPU leaves none of these): the platform's name, so only the framework tells."""
    if not sys.platform.startswith("linux"):
        return sys.platform
    for pattern in GPU_DRIVER_SIGNS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def missing(spec: RunSpec) -> str | None:
    """What the run's framework would say about `spec.device` missing here, in its words (engine.presence,
    jobs.device_check), or None: the device may be here, or only the framework can tell."""
    if spec.device not in ("gpu", "tpu") or gpu_driver() is not None:
        return None
    backend = backends.get(spec.backend)
    evidence = tpu.evidence()
    if spec.device == "gpu":
        head = f"gpu requested but {backend.display_name} sees no GPU"
    elif evidence or (backend.remote_tpu and spec.tpu not in (None, "local")):
        return None  # a TPU may be here, or is remote (--tpu NAME): the run finds it
    else:
        head = backend.no_tpu
    seen = f"TPU evidence: {evidence}" if evidence else "no TPU"
    return f"{head}; found: CPU ({os.cpu_count()} cores), no GPU ({NO_DRIVER}), {seen}; use --device cpu or auto"
