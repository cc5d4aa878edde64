"""Whether the device a run asks for is on this host, asked of the run's framework before the run
has a row: a missing GPU or TPU is bad input (exit 2, nothing stored), not a `failed` run.

The full answer (strategies, TPU initialisation) stays with each backend's devices.create when
the run starts; this asks only what a missing device fails on (Backend.require), and nothing that fixes the framework's
set-up early (physical devices only: a CPU run's logical devices are set later). A remote TPU
(`--tpu NAME`) and a multi-host JAX run are left to the run itself: they need the cluster first.
"""

from __future__ import annotations

from dashbench.core.spec import RunSpec
from dashbench.engine import backends, driverless
from dashbench.engine.target import DeviceError


def require(spec: RunSpec) -> None:
    """Raise DeviceError (a SpecError on `device`) when `spec.device` is a gpu or tpu this host does
    not have, or SpecError on `replicas` for more GPUs than it has."""
    if spec.device not in ("gpu", "tpu"):
        return  # the CPU is always there; auto becomes whatever is
    backends.select(spec.backend)
    backend = backends.get(spec.backend)
    if backend.joins_cluster_first():
        return  # the cluster must be joined before the framework lists any device
    said = driverless.missing(spec)  # a host with no GPU driver: told without a framework start
    if said is not None:
        raise DeviceError(said)
    backend.require(spec)
