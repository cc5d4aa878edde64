"""What a run runs on, whatever its backend: the resolved Target, the error for a device that is not
there, and the names of GPUs and of this host's CPU. No framework here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from dashbench.core.spec import SpecError

# Checked in order: "H200" before "H100" is irrelevant, but "L4" must not match "L40S".
_GPU_NAMES = ("H200", "H100", "A100", "V100", "P100", "K80", "T4", "L4")


class DeviceError(SpecError):
    """The requested device is not available; the message says what was found instead."""

    def __init__(self, message: str):
        super().__init__("device", message)


@dataclass
class Target:
    """A strategy plus what it runs on, resolved from a RunSpec."""

    strategy: Any
    kind: str  # cpu | gpu | tpu
    accelerator: str  # canonical name (peaks.csv) or the raw device name
    accelerator_count: int
    device_names: list = field(default_factory=list)
    replicas: int = 1
    multi_worker: bool = False
    env: dict = field(default_factory=dict)  # facts for the run's environment record (e.g. "tpu")


def canonical_gpu(raw: str) -> str:
    """'NVIDIA H100 80GB HBM3' → 'H100'; an unknown name is kept as it is."""
    for name in _GPU_NAMES:
        if re.search(rf"(?<![A-Za-z0-9]){name}(?![0-9A-Za-z])", raw):
            return name
    return raw or "GPU"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()
