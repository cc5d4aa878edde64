"""Whether the device a run asks for is on this host, asked of the run's framework before the run
has a row: a missing GPU or TPU is bad input (exit 2, nothing stored), not a `failed` run.

The full answer (strategies, TPU initialisation) stays with devices.create / jax_devices.create when
the run starts; this asks only what a missing device fails on, and nothing that fixes the framework's
set-up early (physical devices only: a CPU run's logical devices are set later). A remote TPU
(`--tpu NAME`) and a multi-host JAX run are left to the run itself: they need the cluster first.
"""

from __future__ import annotations

from dashbench.hardware import tpu
from dashbench.engine import backends, driverless, frameworks
from dashbench.engine.jax import devices as jax_devices
from dashbench.engine.tensorflow import devices
from dashbench.core.spec import RunSpec, SpecError


def require(spec: RunSpec) -> None:
    """Raise DeviceError (a SpecError on `device`) when `spec.device` is a gpu or tpu this host does
    not have, or SpecError on `replicas` for more GPUs than it has."""
    if spec.device not in ("gpu", "tpu"):
        return  # the CPU is always there; auto becomes whatever is
    backends.select(spec.backend)
    if spec.backend == "jax" and jax_devices.distributed_settings() is not None:
        return  # jax.distributed.initialize must come before JAX lists any device
    said = driverless.missing(spec)  # a host with no GPU driver: told without a framework start
    if said is not None:
        raise devices.DeviceError(said)
    if spec.backend == "jax":
        _require_jax(spec)
    else:
        _require_tensorflow(spec)


def _require_tensorflow(spec: RunSpec) -> None:
    tf = frameworks.import_tensorflow()
    if spec.device == "gpu":
        with frameworks.native_stderr_silenced():
            gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            raise devices.DeviceError(f"gpu requested but TensorFlow sees no GPU; found: {devices.found_summary(tf)}")
        if spec.replicas is not None and spec.replicas > len(gpus):
            raise devices.DeviceError(f"{spec.replicas} GPUs requested but TensorFlow sees {len(gpus)}; "
                                      f"found: {devices.found_summary(tf)}")
    elif spec.tpu in (None, "local") and not tpu.evidence():
        raise devices.DeviceError("tpu requested but this host shows no TPU (no /dev/accel0 or /dev/vfio/0, "
                                  f"no TPU_ACCELERATOR_TYPE or TPU_NAME); found: {devices.found_summary(tf)}")


def _require_jax(spec: RunSpec) -> None:
    if jax_devices.distributed_settings() is not None:
        return  # jax.distributed.initialize must come before JAX lists any device
    jax_devices.prepare(spec)
    jax = frameworks.import_jax()
    try:
        with frameworks.native_stderr_silenced():
            found = jax.devices(spec.device)
    except RuntimeError:  # "Unknown backend: 'tpu' requested, but no platforms ..."
        found = []
    kind = spec.device
    if not found:
        raise devices.DeviceError(f"{kind} requested but JAX sees no {kind.upper()}; "
                                  f"found: {jax_devices.found_summary(jax)}")
    if kind == "gpu" and spec.replicas is not None and spec.replicas > len(found):
        raise SpecError("replicas", f"{spec.replicas} gpu devices requested but JAX sees {len(found)}")
