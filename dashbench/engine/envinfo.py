"""The environment record stored with every run: enough to judge two runs comparable or not.

Versions come from package metadata, so this module imports no TensorFlow itself.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Optional

from dashbench import __version__
from dashbench.engine.target import cpu_model

# What a run started on a Ray cluster's node learns of it from its environment (fleet/launch.py).
FLEET_ENV = {
    "host": "DASHBENCH_HOST",
    "ray_node_id": "DASHBENCH_RAY_NODE_ID",
    "ray_job": "DASHBENCH_RAY_JOB",
    "cluster": "DASHBENCH_RAY_CLUSTER",
}


def package_version(name: str) -> Optional[str]:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def tensorflow_version() -> Optional[str]:
    # The TPU and GPU builds install under other distribution names.
    for name in ("tensorflow", "tensorflow-tpu", "tensorflow-cpu", "tf-nightly"):
        version = package_version(name)
        if version:
            return version
    return None


def git_commit() -> Optional[str]:
    """HEAD of the checkout dashbench runs from, with '-dirty' when files differ; None outside git."""
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        if head.returncode:
            return None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("-dirty" if status.stdout.strip() else "")


def record(device_names: list, precision: str, xla: bool, extra: Optional[dict] = None) -> dict:
    env = {
        "tensorflow": tensorflow_version(),
        "keras": package_version("keras"),
        "jax": package_version("jax"),
        "jaxlib": package_version("jaxlib"),
        "python": platform.python_version(),
        "host": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "device_names": list(device_names),
        "device_count": len(device_names),
        "precision": precision,
        "xla": xla,
        "dashbench_version": __version__,
        "git_commit": git_commit(),
        "platform": platform.platform(),
    }
    fleet = {key: os.environ[name] for key, name in FLEET_ENV.items() if os.environ.get(name)}
    if fleet:  # started by a cluster (dashbench/fleet/launch.py): the node that ran it
        env["fleet"] = fleet
    env.update(extra or {})
    return env
