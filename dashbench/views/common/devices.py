"""Which devices the Run page offers, found by `python -m dashbench devices --json` in a subprocess
so that TensorFlow stays out of the app process (libtpu allows one process per TPU host)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

_DEVICE_CACHE: dict[str, tuple[float, "DeviceInfo"]] = {}
_DEVICE_LOCK = threading.Lock()
_LOOKING: dict[str, threading.Thread] = {}  # python -> the discovery running in the background for it
# A failed discovery is retried after this long; a successful one holds for the process (devices
# do not come and go under a running server; restart it after changing hardware).
DEVICE_RETRY_S = 60.0


@dataclass
class DeviceInfo:
    """What `python -m dashbench devices --json` reported; `kinds` are RunSpec device values."""

    kinds: list[str]
    description: dict[str, str] = field(default_factory=dict)
    raw: Any = None
    error: str | None = None


# What the Run page offers while the discovery is still running: the CPU, which every machine has.
LOOKING = DeviceInfo(kinds=["cpu"], description={"cpu": "CPU"})


def device_info(
    python: str | None = None, timeout: float = 180.0, refresh: bool = False, wait: bool = True
) -> DeviceInfo | None:
    """Devices on this machine, discovered in a subprocess (TF stays out of the app) and cached per process.
    With `wait=False`, None while the discovery runs (started in the background if it was not running)."""
    python = python or sys.executable
    with _DEVICE_LOCK:
        cached = _DEVICE_CACHE.get(python)
        stale = cached is not None and cached[1].error and time.monotonic() - cached[0] > DEVICE_RETRY_S
        if not (refresh or cached is None or stale):
            return cached[1]
        looking = _LOOKING.get(python)
        if looking is None:
            looking = threading.Thread(target=_look, args=(python, timeout), name="dashbench-devices", daemon=True)
            _LOOKING[python] = looking
            looking.start()
    if not wait:
        return None
    looking.join()
    with _DEVICE_LOCK:
        return _DEVICE_CACHE[python][1]


LOOK_AHEAD_ENV = "DASHBENCH_DEVICE_LOOK_AHEAD"


def look_ahead() -> None:
    """Start the discovery in the background, so that the Run page finds it done: the dashboard calls it on
    any page's first run, and a visitor who opens Compare first then finds the Run form whole at once.
    DASHBENCH_DEVICE_LOOK_AHEAD=0: not ahead, only once the Run page is shown (a dashboard opened mostly to
    read results spares the TensorFlow process)."""
    if os.environ.get(LOOK_AHEAD_ENV, "").strip() == "0":
        return
    device_info(wait=False)


def _look(python: str, timeout: float) -> None:
    try:
        found = _discover(python, timeout)
    except Exception as exc:  # a thread's error would be lost: the page says it instead
        found = DeviceInfo(kinds=["cpu"], error=f"device discovery failed ({exc}); offering the CPU only")
    with _DEVICE_LOCK:
        _DEVICE_CACHE[python] = (time.monotonic(), found)
        del _LOOKING[python]


def _discover(python: str, timeout: float) -> DeviceInfo:
    try:
        proc = subprocess.run(
            [python, "-m", "dashbench", "devices", "--json"],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return DeviceInfo(kinds=["cpu"], error=f"device discovery failed ({exc}); offering the CPU only")
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return DeviceInfo(kinds=["cpu"], error=f"device discovery failed: {last}; offering the CPU only")
    try:
        raw = json.loads(proc.stdout)
    except ValueError:
        return DeviceInfo(kinds=["cpu"], error="device discovery printed no JSON; offering the CPU only")
    return parse_devices(raw)


def parse_devices(raw: Any) -> DeviceInfo:
    """The `devices --json` report (dashbench.devices.discover) → the device kinds a run may ask for.

    The CPU is always there; a GPU only if TensorFlow lists one; a TPU only with evidence of one.
    The kind `auto` would pick comes first.
    """
    if not isinstance(raw, dict):
        return DeviceInfo(
            kinds=["cpu"],
            description={"cpu": "CPU"},
            raw=raw,
            error="device discovery printed an unexpected report; offering the CPU only",
        )
    kinds, description = [], {}
    tpu = raw.get("tpu") or {}
    if isinstance(tpu, dict) and tpu.get("evidence"):
        kinds.append("tpu")
        description["tpu"] = "TPU" + (f": {tpu['accelerator_type']}" if tpu.get("accelerator_type") else "")
    gpus = raw.get("gpus") or []
    if gpus:
        kinds.append("gpu")
        names = sorted({str(g.get("accelerator") or g.get("device_name") or "GPU") for g in gpus})
        description["gpu"] = f"GPU: {len(gpus)}× {', '.join(names)}"
    kinds.append("cpu")
    cpu = raw.get("cpu") or {}
    description["cpu"] = "CPU" + (f": {cpu['model']}" if isinstance(cpu, dict) and cpu.get("model") else "")
    default = raw.get("default_device")
    if default in kinds:
        kinds.remove(default)
        kinds.insert(0, default)
    return DeviceInfo(kinds=kinds, description=description, raw=raw)
