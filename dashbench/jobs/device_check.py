"""Whether a sweep's device is on this host, asked once, before its first point is queued.

Each point is a run process that would find a missing GPU itself, before its row (engine.presence),
but only after its row was queued, and once per point: docs/cli.md's `sweep --device gpu` on a CPU
box started TensorFlow three times and stored three failed rows. The sweep's own process must not
start a framework (libtpu allows one process per TPU host, and the points need it), so it asks
`python -m dashbench devices --json --backend B`, one framework start, and reads its report.
No TensorFlow here.
"""

from __future__ import annotations

import json
import subprocess
import sys

from dashbench.core.spec import RunSpec
from dashbench.engine import backends, driverless

# The discovery command before `--backend B`; a module attribute so tests can count its starts.
DEVICES_COMMAND = [sys.executable, "-m", "dashbench", "devices", "--json"]
TIMEOUT_S = 300.0


def missing(spec: RunSpec, timeout: float = TIMEOUT_S) -> str | None:
    """Why `spec.device` cannot run here (the words a run would say), or None. The CPU and `auto`
    always can; a discovery that fails says nothing here: each point then finds out for itself."""
    if spec.device not in ("gpu", "tpu"):
        return None
    said = driverless.missing(spec)  # a host with no GPU driver: no framework start needed to tell
    if said is not None:
        return said
    try:
        done = subprocess.run(
            [*DEVICES_COMMAND, "--backend", spec.backend],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        report = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        report = None
    return judge(spec, report) if isinstance(report, dict) else None


def judge(spec: RunSpec, report: dict) -> str | None:
    """The `devices --json` report (the backend's Backend.discover) against the spec."""
    if spec.device not in ("gpu", "tpu"):
        return None
    backend = backends.get(spec.backend)
    framework = backend.display_name
    gpus = report.get("gpus") if isinstance(report.get("gpus"), list) else []
    tpu = report.get("tpu") if isinstance(report.get("tpu"), dict) else {}
    by_kind = report.get("devices") if isinstance(report.get("devices"), dict) else None  # JAX's report
    tpus = len(by_kind.get("tpu") or []) if by_kind is not None else int(bool(tpu.get("evidence")))
    if spec.device == "gpu" and gpus and (spec.replicas or 1) <= len(gpus):
        return None
    if spec.device == "tpu" and (tpus or (backend.remote_tpu and spec.tpu not in (None, "local"))):
        return None  # a remote TPU (--tpu NAME) is found by the run itself
    return f"{_wanted(spec, len(gpus))} but {framework} sees {_seen(spec.device, len(gpus))}; found: {_found(report, gpus, tpus)}"


def _wanted(spec: RunSpec, gpus: int) -> str:
    if spec.device == "gpu" and gpus and spec.replicas:
        return f"{spec.replicas} GPUs requested"
    return f"{spec.device} requested"


def _seen(kind: str, gpus: int) -> str:
    return str(gpus) if kind == "gpu" and gpus else f"no {kind.upper()}"


def _found(report: dict, gpus: list, tpus: int) -> str:
    cpu = report.get("cpu") if isinstance(report.get("cpu"), dict) else {}
    parts = [f"CPU ({cpu['cores']} cores)" if isinstance(cpu.get("cores"), int) else "CPU"]
    parts.append(f"{len(gpus)}× GPU" if gpus else "no GPU")
    parts.append("a TPU" if tpus else "no TPU")
    usable = [kind for kind, seen in (("tpu", tpus), ("gpu", gpus)) if seen] + ["cpu", "auto"]
    return ", ".join(parts) + f"; use --device {' or '.join(usable)}"
