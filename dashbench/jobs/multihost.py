"""One stored run per multi-host run, however it was started.

A multi-host run is one program started on every host at once — by hand (TF_CONFIG, or
JAX_COORDINATOR_ADDRESS + JAX_NUM_PROCESSES + JAX_PROCESS_ID), by a TPU pod slice's runtime, or by
the fleet's launcher (fleet/slices.py). Every process measures the same steps and the same losses,
so only worker 0 writes the run; the others add their host and devices to its placement when they
end (store/placement.py). They agree on the run's id through `--run-id` or DASHBENCH_RUN_ID,
given the same on every host; a JAX run without one takes worker 0's through JAX's own collectives
once the hosts have joined (engine/jax/devices.py). No TensorFlow or JAX here.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Optional

RUN_ID_ENV = "DASHBENCH_RUN_ID"
JOIN_WAIT_S = 120.0
HOSTS_KEY = "hosts"  # placement["hosts"]: each process's host, in process order


@dataclass(frozen=True)
class Role:
    """This process's place in a multi-host run: its index (0 writes the run) among `count`."""

    index: int
    count: int
    how: str  # "jax" | "tf_config" | "tpu"

    @property
    def writes_run(self) -> bool:
        return self.index == 0


def role(environ=None) -> Optional[Role]:
    """This process's Role when the environment names several hosts, else None. A value that is not
    a number is left to the engine, which names the field."""
    environ = os.environ if environ is None else environ
    try:
        if environ.get("JAX_COORDINATOR_ADDRESS"):
            count = int(environ.get("JAX_NUM_PROCESSES", "0") or 0)
            index = int(environ.get("JAX_PROCESS_ID", "0") or 0)
            return Role(index, count, "jax") if count > 1 or index > 0 else None
        raw = environ.get("TF_CONFIG")
        if raw:
            config = json.loads(raw)
            workers = list(config.get("cluster", {}).get("worker", []))
            task = config.get("task", {})
            if len(workers) > 1 and task.get("type", "worker") == "worker":
                return Role(int(task.get("index", 0)), len(workers), "tf_config")
            return None
        hosts = [h for h in environ.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
        if len(hosts) > 1:
            return Role(int(environ.get("TPU_WORKER_ID", "0") or 0), len(hosts), "tpu")
    except (ValueError, TypeError, AttributeError):
        return None
    return None


def agreed_run_id(given: Optional[str], environ=None) -> Optional[str]:
    """The id every host of the run records under: `--run-id`, else DASHBENCH_RUN_ID."""
    environ = os.environ if environ is None else environ
    return given or environ.get(RUN_ID_ENV) or None


def placement_entry(result, index: int, host: str) -> dict:
    """What process `index` adds to the run's placement: its host, and its own devices
    (the engine's `local_devices`; the run's devices where the engine does not say)."""
    env = getattr(result, "env", None) or {}
    devices = env.get("local_devices") or list(getattr(result, "device_names", None) or [])
    return {
        "index": index,
        "host": host,
        "devices": [str(d) for d in devices],
        "node_id": os.environ.get("DASHBENCH_RAY_NODE_ID") or None,
    }


def merged_placement(placement: dict, entry: dict, count: int) -> dict:
    """`placement` with process `entry['index']`'s host and devices in it (idempotent).
    placement["hosts"] lists every process's host in process order ('' until it has reported);
    placement["devices:<i>"] the devices of process i; placement["ray_nodes"] Ray's node ids."""
    merged = dict(placement or {})
    index = int(entry["index"])
    size = max(count, index + 1, len(merged.get(HOSTS_KEY) or []))
    hosts = list(merged.get(HOSTS_KEY) or []) + [""] * size
    hosts = hosts[:size]
    hosts[index] = entry["host"]
    merged[HOSTS_KEY] = hosts
    merged[f"devices:{index}"] = list(entry["devices"])
    if entry.get("node_id"):
        nodes = (list(merged.get("ray_nodes") or []) + [""] * size)[:size]
        nodes[index] = entry["node_id"]
        merged["ray_nodes"] = nodes
    return merged


# How the collectives say that a peer process or host went away (JAX's gloo and coordination service,
# TensorFlow's collective ops), as opposed to this process failing on its own.
_PEER_LOST = re.compile(
    r"connection (closed|reset) by peer|gloo .*failed|coordination service|heartbeat|"
    r"socket closed|failed to connect to all addresses|UNAVAILABLE:|peer .*(lost|died|unreachable)",
    re.IGNORECASE,
)


def peer_lost(error: str) -> bool:
    """Whether a multi-host run's error says a peer went away (the run is then `interrupted`, not `failed`)."""
    return bool(_PEER_LOST.search(error or ""))


def join_wait_s(environ=None) -> float:
    """How long a later worker waits for worker 0's result (DASHBENCH_JOIN_WAIT_S, default 120 s):
    worker 0 ends within seconds of the others, its CPU peak probe included."""
    environ = os.environ if environ is None else environ
    try:
        return max(0.0, float(environ.get("DASHBENCH_JOIN_WAIT_S", JOIN_WAIT_S)))
    except ValueError:
        return JOIN_WAIT_S


def missing_id_warning(r: Role) -> str:
    return (
        f"warning: this is worker {r.index} of a {r.count}-host run and it has no run id, so it recorded "
        f"nothing (worker 0 records the run): give every host the same --run-id or {RUN_ID_ENV} to "
        "add this host to the run's placement"
    )
