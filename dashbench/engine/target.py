"""What a run runs on, whatever its backend: the resolved Target, the error for a device that is not
there, and the names of GPUs and of this host's CPU. No framework here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dashbench.core.spec import SpecError
from dashbench.hardware import catalog


class DeviceError(SpecError):
    """The requested device is not available; the message says what was found instead."""

    def __init__(self, message: str):
        super().__init__("device", message)


@dataclass
class Target:
    """A strategy plus what it runs on, resolved from a RunSpec."""

    strategy: Any
    kind: str  # cpu | gpu | tpu
    accelerator: str  # canonical name (the hardware catalog's family or PCIe variant) or the raw device name
    accelerator_count: int
    device_names: list = field(default_factory=list)
    replicas: int = 1
    multi_worker: bool = False
    env: dict = field(default_factory=dict)  # facts for the run's environment record (e.g. "tpu")


def canonical_gpu(raw: str) -> str:
    """'NVIDIA H100 80GB HBM3' → 'H100' (the family, as prices name it: MFU reads its default row,
    the SXM part); 'NVIDIA H100 PCIe' → 'H100 PCIe' (a PCIe part peaks lower); an unknown name ('NVIDIA
    L40S', not an L4) is kept as it is."""
    chip = catalog.resolve(raw) if raw else None
    if chip is None or chip.kind != "gpu":
        return raw or "GPU"
    return chip.name if "PCIe" in chip.name else chip.family


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
