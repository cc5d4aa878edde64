"""What JAX sees here, and the devices a JAX run is spread over.

Two things must happen before JAX starts its runtime, so they happen here first: a CPU run of N
replicas asks XLA for N host devices (`--xla_force_host_platform_device_count`), and a multi-host
run (a TPU pod slice, or hosts named in JAX_COORDINATOR_ADDRESS) joins its peers through
`jax.distributed.initialize()`. As on TensorFlow, a device that was asked for and is not there is a
DeviceError naming what was found — never a silent fall-back to the CPU.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Optional

from dashbench.core.spec import RunSpec, SpecError, divisibility_message
from dashbench.engine import probe

# import_jax and native_stderr_silenced are also used as jax_devices.X by the JAX loop and accuracy.
from dashbench.engine.frameworks import import_jax, native_stderr_silenced
from dashbench.engine.target import DeviceError, Target, canonical_gpu
from dashbench.hardware import tpu

_HOST_DEVICES = "--xla_force_host_platform_device_count"
_KINDS = {"cpu": "cpu", "gpu": "gpu", "tpu": "tpu"}
RUN_ID_ENV = "DASHBENCH_RUN_ID"  # jobs/multihost.py's: the id every host of a run records under
_RUN_ID_BYTES = 128


def prepare(spec: RunSpec) -> None:
    """Set what JAX reads when its runtime starts. Before `import jax` (after it, it changes nothing)."""
    replicas = spec.replicas or 1
    if spec.device in ("cpu", "auto") and replicas > 1 and "jax" not in sys.modules:
        flags = os.environ.get("XLA_FLAGS", "")
        if _host_device_count(flags) < replicas:
            flags = re.sub(rf"{_HOST_DEVICES}=\d+", "", flags).strip()
            os.environ["XLA_FLAGS"] = f"{flags} {_HOST_DEVICES}={replicas}".strip()
    if spec.device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")  # a CPU run must not start (or wait for) a GPU or TPU


def _host_device_count(flags: str) -> int:
    found = re.search(rf"{_HOST_DEVICES}=(\d+)", flags)
    return int(found.group(1)) if found else 1


def distributed_settings(environ=os.environ) -> Optional[dict]:
    """jax.distributed.initialize()'s arguments when the environment names several hosts, else None.

    JAX_COORDINATOR_ADDRESS (+ JAX_NUM_PROCESSES, JAX_PROCESS_ID) names them explicitly; on a TPU
    pod slice the TPU runtime does (TPU_WORKER_HOSTNAMES lists more than one host) and JAX finds the
    rest itself, so no arguments are passed."""
    address = environ.get("JAX_COORDINATOR_ADDRESS")
    if address:
        settings: dict = {"coordinator_address": address}
        for key, name in (("num_processes", "JAX_NUM_PROCESSES"), ("process_id", "JAX_PROCESS_ID")):
            raw = environ.get(name)
            if raw is None:
                continue
            try:
                settings[key] = int(raw)
            except ValueError:
                raise SpecError(name, f"must be an integer, got {raw!r}") from None
        return settings
    hosts = [h for h in environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
    return {} if len(hosts) > 1 else None


def create(spec: RunSpec) -> Target:
    """The devices of the spec's kind, as a Target whose `strategy` is the list of jax devices."""
    prepare(spec)
    jax = import_jax()
    settings = distributed_settings()
    multi_host = settings is not None
    if multi_host and not jax.distributed.is_initialized():
        jax.distributed.initialize(**settings)
    if multi_host and jax.process_count() > 1:
        _share_run_id(jax)
    kind = spec.device if spec.device != "auto" else _default_kind(jax)
    found = _devices(jax, kind)
    if not found:
        raise DeviceError(f"{kind} requested but JAX sees no {kind.upper()}; found: {found_summary(jax)}")
    replicas = spec.replicas or len(found)
    if multi_host and spec.replicas not in (None, len(found)):
        raise SpecError(
            "replicas", f"a multi-host run uses all {len(found)} devices; drop --replicas or use {len(found)}"
        )
    if kind == "tpu" and spec.replicas not in (None, len(found)):
        raise SpecError(
            "replicas", f"a TPU runs on all its {len(found)} devices here; drop --replicas or use {len(found)}"
        )
    if replicas > len(found):
        hint = " (a CPU run asks for them itself: run it in a fresh process)" if kind == "cpu" else ""
        raise SpecError("replicas", f"{replicas} {kind} devices requested but JAX sees {len(found)}{hint}")
    if spec.batch_size % replicas:
        raise SpecError("batch_size", divisibility_message(spec.batch_size, replicas))
    used = found[:replicas]
    names = [_device_name(d) for d in used]
    env = {"jax_devices": [str(d) for d in used], "process_count": jax.process_count()}
    if multi_host:  # what this process adds to the one stored run's placement (jobs/multihost.py)
        env["process_index"] = jax.process_index()
        env["local_devices"] = [_device_name(d) for d in used if d.process_index == jax.process_index()]
    if kind == "tpu":
        identity = tpu.identify_here(device_kinds=[d.device_kind for d in used])
        env["tpu"] = identity.to_env()
        return Target(used, "tpu", identity.name, identity.chips, names, replicas, multi_host, env)
    if kind == "gpu":
        return Target(used, "gpu", canonical_gpu(used[0].device_kind), replicas, names, replicas, multi_host, env)
    hosts = jax.process_count()
    return Target(used, "cpu", "CPU", hosts, names, replicas, multi_host, env)


def _share_run_id(jax) -> None:
    """Every process of a multi-host run records under worker 0's run id (jobs/multihost.py): one
    without DASHBENCH_RUN_ID takes process 0's, broadcast once the hosts have joined. All take part."""
    import numpy as np
    from jax.experimental import multihost_utils

    mine = os.environ.get(RUN_ID_ENV, "").encode()[:_RUN_ID_BYTES]
    sent = np.zeros(_RUN_ID_BYTES, np.uint8)
    sent[: len(mine)] = np.frombuffer(mine, np.uint8)
    with native_stderr_silenced():
        got = np.asarray(multihost_utils.broadcast_one_to_all(sent)).astype(np.uint8).tobytes().rstrip(b"\0").decode()
    if got and not os.environ.get(RUN_ID_ENV):
        os.environ[RUN_ID_ENV] = got


def _default_kind(jax) -> str:
    backend = jax.default_backend()
    return backend if backend in _KINDS else "cpu"


def _devices(jax, kind: str) -> list:
    try:
        with native_stderr_silenced():
            return list(jax.devices(kind))
    except RuntimeError:  # "Unknown backend: 'tpu' requested, but no platforms that are instances of tpu are present"
        return []


def _device_name(device) -> str:
    """A device string in TensorFlow's form, so placement reads the same on both backends."""
    return f"/device:{device.platform.upper()}:{device.id}"


def found_summary(jax) -> str:
    """'CPU (2 cores, 1 JAX device); no GPU; no TPU; use --device cpu or auto'."""
    parts = [f"CPU ({os.cpu_count()} cores, {len(_devices(jax, 'cpu'))} JAX device(s))"]
    usable = ["cpu"]
    for kind in ("gpu", "tpu"):
        seen = _devices(jax, kind)
        if seen:
            parts.append(f"{len(seen)}× {seen[0].device_kind}")
            usable.insert(0, kind)
        else:
            parts.append(f"no {kind.upper()}")
    evidence = tpu.evidence()
    if evidence and not _devices(jax, "tpu"):
        parts.append(f"TPU evidence: {evidence}, but JAX has no TPU runtime (install requirements-tpu-jax.txt)")
    return ", ".join(parts) + f"; use --device {' or '.join(usable + ['auto'])}"


def cpu_peak_tflops(dtype: str = "float32", size: int = 0, repeats: int = 3) -> float:
    """XLA:CPU's attainable matmul rate in TFLOP/s (JAX's own, so no TensorFlow is needed), or the
    host's calibrated peak (dashbench.engine.probe.cpu_peak_tflops)."""
    return probe.cpu_peak_tflops("jax", dtype, size or None, repeats)


def discover() -> dict:
    """What JAX sees here, for `devices --backend jax` (the shape of devices.discover()'s answer)."""
    from dashbench.engine.target import cpu_model

    jax = import_jax()
    gpus = [
        {"name": _device_name(d), "device_name": d.device_kind, "accelerator": canonical_gpu(d.device_kind)}
        for d in _devices(jax, "gpu")
    ]
    tpus = _devices(jax, "tpu")
    evidence = tpu.evidence()
    info = {"evidence": evidence, **tpu.describe_type(evidence)}
    if tpus:
        info["identity"] = tpu.identify_here(device_kinds=[d.device_kind for d in tpus]).to_env()
    return {
        "jax": jax.__version__,
        "devices": {kind: [_device_name(d) for d in _devices(jax, kind)] for kind in _KINDS},
        "gpus": gpus,
        "tpu": info,
        "cpu": {"model": cpu_model(), "cores": os.cpu_count(), "jax_devices": len(_devices(jax, "cpu"))},
        "process_count": jax.process_count(),
        "default_device": _default_kind(jax),
    }
