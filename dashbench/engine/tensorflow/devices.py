"""What TensorFlow sees here, and the tf.distribute strategy for a run.

A device that was asked for and is not there is a DeviceError naming what was found instead —
never a silent fall-back to the CPU (the Colab article: switching the runtime to TPU changed nothing).

TensorFlow is imported inside functions, through import_tensorflow() (dashbench.engine.frameworks),
which quiets its logging first.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Optional

from dashbench.core.spec import RunSpec, SpecError, divisibility_message
from dashbench.engine import probe

# import_tensorflow and native_stderr_silenced are also used as devices.X by the loop and accuracy.
from dashbench.engine.frameworks import import_tensorflow, native_stderr_silenced

# DeviceError, Target and the names are every backend's; also used as devices.X by the TF modules and tests.
from dashbench.engine.target import DeviceError, Target, canonical_gpu, cpu_model
from dashbench.hardware import tpu


def tpu_evidence() -> Optional[str]:
    """Why this host looks like a TPU VM, or None (dashbench.hardware.tpu.evidence)."""
    return tpu.evidence()


def discover() -> dict:
    """What TensorFlow sees here, for `devices --json` and the environment record."""
    tf = import_tensorflow()
    with native_stderr_silenced():
        physical = tf.config.list_physical_devices()
    gpus = []
    for device in physical:
        if device.device_type == "GPU":
            details = _gpu_details(tf, device)
            gpus.append({"name": device.name, **details, "accelerator": canonical_gpu(details.get("device_name", ""))})
    return {
        "tensorflow": tf.__version__,
        "physical_devices": [{"name": d.name, "type": d.device_type} for d in physical],
        "gpus": gpus,
        "tpu": {"evidence": tpu_evidence(), **tpu.describe_type(tpu_evidence())},
        "cpu": {"model": cpu_model(), "cores": os.cpu_count()},
        "tf_config": bool(os.environ.get("TF_CONFIG")),
        "default_device": resolve_auto(tf),
    }


def resolve_auto(tf) -> str:
    if tpu_evidence():
        return "tpu"
    if tf.config.list_physical_devices("GPU"):
        return "gpu"
    return "cpu"


def create(spec: RunSpec) -> Target:
    """The strategy for this spec. CPU logical devices must be set before TensorFlow initialises."""
    tf = import_tensorflow()
    kind = spec.device
    if kind == "auto":
        kind = resolve_auto(tf)
    if kind == "tpu":
        return _tpu_target(tf, spec)
    if _multi_worker_config():
        return _multi_worker_target(tf, spec, kind)
    if kind == "gpu":
        return _gpu_target(tf, spec)
    return _cpu_target(tf, spec)


def _cpu_target(tf, spec: RunSpec) -> Target:
    replicas = spec.replicas or 1
    _check_divisible(spec.batch_size, replicas)
    cpus = tf.config.list_physical_devices("CPU")
    try:
        # A CPU run must not put ops on a GPU that happens to be there.
        tf.config.set_visible_devices([], "GPU")
        if replicas > 1:
            tf.config.set_logical_device_configuration(
                cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(replicas)]
            )
    except RuntimeError:
        pass  # already initialised: checked below
    logical = tf.config.list_logical_devices("CPU")
    if len(logical) < replicas:
        raise SpecError(
            "replicas",
            f"TensorFlow is already running in this process with {len(logical)} CPU device(s); "
            f"{replicas} replicas need a fresh process (python -m dashbench run ... --replicas {replicas})",
        )
    names = [d.name for d in logical[:replicas]]
    if replicas == 1:
        strategy = tf.distribute.OneDeviceStrategy(names[0])
    else:
        strategy = tf.distribute.MirroredStrategy(names, cross_device_ops=tf.distribute.ReductionToOneDevice())
    return Target(strategy, "cpu", "CPU", 1, names, replicas)


def _gpu_target(tf, spec: RunSpec) -> Target:
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        raise DeviceError(f"gpu requested but TensorFlow sees no GPU; found: {found_summary(tf)}")
    replicas = spec.replicas or len(gpus)
    if replicas > len(gpus):
        raise DeviceError(f"{replicas} GPUs requested but TensorFlow sees {len(gpus)}; found: {found_summary(tf)}")
    _check_divisible(spec.batch_size, replicas)
    logical = [d.name for d in tf.config.list_logical_devices("GPU")][:replicas]
    if replicas == 1:
        strategy = tf.distribute.OneDeviceStrategy(logical[0])
    else:
        strategy = tf.distribute.MirroredStrategy(logical)
    raw = _gpu_details(tf, gpus[0]).get("device_name", gpus[0].name)
    return Target(
        strategy,
        "gpu",
        canonical_gpu(raw),
        replicas,
        [_gpu_details(tf, g).get("device_name", g.name) for g in gpus[:replicas]],
        replicas,
    )


def _tpu_target(tf, spec: RunSpec) -> Target:
    name = spec.tpu or "local"
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=name)
        if name != "local":
            tf.config.experimental_connect_to_cluster(resolver)
        with native_stderr_silenced():
            topology = tf.tpu.experimental.initialize_tpu_system(resolver)
        strategy = tf.distribute.TPUStrategy(resolver)
    except DeviceError:
        raise
    except Exception as exc:  # any failure to reach a TPU is the same answer for the user
        # The first sentence says it ("TPUs not found in the cluster"); the rest is kernel detail.
        reason = (str(exc).strip().split(". ")[0].splitlines() or [type(exc).__name__])[0][:160]
        raise DeviceError(
            f"tpu requested (tpu={name!r}) but no TPU could be initialised ({reason}); found: {found_summary(tf)}"
        ) from None
    replicas = strategy.num_replicas_in_sync
    if spec.replicas is not None and spec.replicas != replicas:
        raise SpecError(
            "replicas",
            f"a TPU runs on all its {replicas} devices (cores or chips) here; drop --replicas or use {replicas}",
        )
    _check_divisible(spec.batch_size, replicas)
    # TensorFlow lists TPU devices without naming the chip: the VM's accelerator type does.
    identity = tpu.identify_here(device_count=replicas)
    env = identity.to_env()
    with contextlib.suppress(Exception):  # informative only: [x, y, z, cores] of the slice
        env["topology_mesh_shape"] = [int(n) for n in topology.mesh_shape]
    names = [d.name for d in tf.config.list_logical_devices("TPU")]
    return Target(strategy, "tpu", identity.name, identity.chips, names, replicas, env={"tpu": env})


def _multi_worker_config() -> Optional[dict]:
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return None
    try:
        config = json.loads(raw)
    except json.JSONDecodeError:
        raise SpecError("TF_CONFIG", "is not valid JSON") from None
    workers = config.get("cluster", {}).get("worker", [])
    return config if len(workers) > 1 else None


def _multi_worker_target(tf, spec: RunSpec, kind: str) -> Target:
    if kind == "gpu" and not tf.config.list_physical_devices("GPU"):
        raise DeviceError(f"gpu requested but TensorFlow sees no GPU; found: {found_summary(tf)}")
    if kind == "cpu":
        with contextlib.suppress(RuntimeError):
            tf.config.set_visible_devices([], "GPU")
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    replicas = strategy.num_replicas_in_sync
    if spec.replicas is not None and spec.replicas != replicas:
        raise SpecError("replicas", f"TF_CONFIG gives {replicas} replicas in all; drop --replicas or use {replicas}")
    _check_divisible(spec.batch_size, replicas)
    workers = len(_multi_worker_config()["cluster"]["worker"])
    # This worker's own devices: what it adds to the stored run's placement (jobs/multihost.py).
    local = len(strategy.extended.worker_devices)
    if kind == "gpu":
        gpus = tf.config.list_physical_devices("GPU")
        raw = _gpu_details(tf, gpus[0]).get("device_name", gpus[0].name)
        return Target(
            strategy,
            "gpu",
            canonical_gpu(raw),
            replicas,
            [raw] * replicas,
            replicas,
            True,
            env={"local_devices": [raw] * local, "process_count": workers},
        )
    return Target(
        strategy,
        "cpu",
        "CPU",
        workers,
        ["CPU"] * replicas,
        replicas,
        True,
        env={"local_devices": ["CPU"] * local, "process_count": workers},
    )


def _check_divisible(batch_size: int, replicas: int) -> None:
    if batch_size % replicas:
        raise SpecError("batch_size", divisibility_message(batch_size, replicas))


def found_summary(tf) -> str:
    """One phrase listing what TensorFlow does see, e.g. 'CPU (2 cores); no GPU; no TPU'."""
    parts = [f"CPU ({os.cpu_count()} cores)"]
    with native_stderr_silenced():
        gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        parts.append(", ".join(_gpu_details(tf, g).get("device_name", g.name) for g in gpus))
    else:
        parts.append("no GPU")
    parts.append(f"TPU evidence: {tpu_evidence()}" if tpu_evidence() else "no TPU")
    usable = ["cpu", "auto"] if not gpus else ["gpu", "cpu", "auto"]
    return ", ".join(parts) + f"; use --device {' or '.join(usable)}"


def canonical_tpu(accelerator_type: str) -> str:
    """'v5litepod-8' → 'TPU v5e'; unknown or empty → 'TPU' (dashbench.hardware.tpu.canonical_name)."""
    return tpu.canonical_name(accelerator_type)


def _gpu_details(tf, device) -> dict:
    try:
        details = tf.config.experimental.get_device_details(device)
    except Exception:  # details are informative only
        return {}
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in details.items()}


def cpu_peak_tflops(
    dtype: str = "float32", size: Optional[int] = None, repeats: int = probe.CPU_PROBE_REPEATS
) -> float:
    """TensorFlow's attainable CPU matmul rate in TFLOP/s, or the host's calibrated peak
    (dashbench.engine.probe.cpu_peak_tflops)."""
    return probe.cpu_peak_tflops("tensorflow", dtype, size, repeats)


def gpu_indices(target) -> tuple[int, ...]:
    """The GPUs' indices (as NVML numbers them, assuming CUDA_VISIBLE_DEVICES is unset) for the load check."""
    if target.kind != "gpu":
        return ()
    return tuple(range(target.replicas))


def variable_devices(model, optimizer) -> list[str]:
    found = set()
    for variable in list(model.variables) + list(optimizer.variables):
        handle = getattr(variable, "value", variable)
        components = getattr(handle, "values", None) or (handle,)
        for component in components:
            device = getattr(component, "device", "")
            if device:
                found.add(device)
    return sorted(found)
