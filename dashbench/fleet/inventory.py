"""What the cluster holds: its hosts, read from Ray's nodes, resources and labels, and the kinds of
place a run can go ("H200 × 8 on gpu-3", "TPU v5e-16 slice, 4 hosts", "H200 × 8 on each of 2 hosts")
with how many devices are free.

Totals and labels come from Ray's state API (exact resource names); what is in use now from the
dashboard's cluster status (the autoscaler's per-node usage, refreshed every few seconds). A host's name
is Ray's node name (`ray start --node-name`, by default its IP): docs/fleet.md asks for the host name.
"""

from __future__ import annotations

import contextlib
import json
import re
import urllib.request
from dataclasses import dataclass, field

from dashbench.core.errors import one_line
from dashbench.fleet import FleetError, require_ray
from dashbench.fleet.address import (
    CLIENT_GRACE_ENV,
    CLIENT_TRIES,
    ClusterAddress,
    client_env,
    client_retry_line,
    client_start_failed,
    parse,
)

_clients: dict[str, object] = {}
CLIENT_LOG_STREAM = "ray.util.client.logsclient"  # the logger of a Ray Client session's log stream


def jobs_client(address: ClusterAddress | str):
    """Ray's JobSubmissionClient for the cluster, made once per process and address (for a Ray
    Client or GCS address it connects to find the dashboard, which takes a while)."""
    address = address if isinstance(address, ClusterAddress) else parse(address)
    client = _clients.get(address.text)
    if client is None:
        require_ray()
        from ray.job_submission import JobSubmissionClient

        client = _new_client(JobSubmissionClient, address)
        _clients[address.text] = client
    return client


@contextlib.contextmanager
def _client_session(address: ClusterAddress):
    """A Ray Client session's settings for the while it is made (client_env), and Ray's INFO line about
    its ray.init arguments kept off the user's terminal (a command says one line when it fails). So is
    the session's log stream's logger (CLIENT_LOG_STREAM): a session the head failed to start ends that
    stream with a traceback of its own, and a session's server has nothing to say to a command that
    only asks it where the dashboard is."""
    if address.kind != "client":
        yield
        return
    import logging
    import os

    grace = os.environ.get(CLIENT_GRACE_ENV)
    os.environ.update(client_env(dict(os.environ)))
    quiet = logging.getLogger("ray.client_builder")
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    # Ray sets this logger's level itself when the session starts: only `disabled` stays as set here.
    stream = logging.getLogger(CLIENT_LOG_STREAM)
    was_disabled = stream.disabled
    stream.disabled = True
    try:
        yield
    finally:
        quiet.setLevel(level)
        stream.disabled = was_disabled
        if grace is None:
            os.environ.pop(CLIENT_GRACE_ENV, None)


def _new_client(make, address: ClusterAddress):
    """`make(address)`, tried again where a Ray Client session failed to start (a busy head): a Ray
    Client address is only used to find the dashboard, and each try is one more session asked of the head."""
    tries = CLIENT_TRIES if address.kind == "client" else 1
    for attempt in range(1, tries + 1):
        try:
            with _client_session(address):
                return make(address.text)
        except Exception as exc:
            said = str(exc)
            if address.kind == "client" and client_start_failed(said):
                if attempt < tries:
                    continue
                raise FleetError("cluster", client_retry_line(address)) from None
            raise FleetError("cluster", f"cannot reach the cluster at {address.text}: {one_line(exc, 300)}") from None


def dashboard_url(address: ClusterAddress | str) -> str:
    return jobs_client(address).get_address()


@dataclass
class Host:
    name: str
    node_id: str
    alive: bool
    head: bool
    cpus: float
    gpus: int
    gpu_type: str | None
    tpu_chips: int
    tpu_type: str | None  # the slice's type, e.g. v4-16 (a pod slice) or v5litepod-8
    slice_name: str | None
    tpu_worker_id: int | None
    slice_head: str | None  # the `TPU-<type>-head` resource worker 0 of a slice carries
    free: dict = field(default_factory=dict)  # CPU, GPU, TPU free now
    resources: dict = field(default_factory=dict)  # Ray's totals, as declared or detected


@dataclass
class Kind:
    """One place a run can go: a GPU host, a TPU host, a TPU slice (several hosts), a CPU host."""

    key: str  # what --on takes: "gpu:H200@gpu-3", "tpu:v4-16@slice", "cpu@host", "gpu:H200@2-hosts"
    label: str
    device: str  # gpu, tpu or cpu
    hosts: tuple[str, ...]
    node_ids: tuple[str, ...]
    devices: int  # GPUs of the host, TPU chips of the host or slice, CPUs of the host, a group's GPUs
    free: int
    # A GPU group: any `host_count` of `hosts` (Ray's placement group chooses which); 0: `hosts` exactly.
    host_count: int = 0

    @property
    def multi_host(self) -> bool:
        return (self.host_count or len(self.hosts)) > 1

    def text(self) -> str:
        return f"{self.label} ({self.free} of {self.devices} free)"


def hosts(address: ClusterAddress | str) -> list[Host]:
    """Every node Ray knows, alive or dead, head first then by name."""
    url = dashboard_url(address)
    require_ray()
    from ray.util.state import list_nodes

    try:
        nodes = list_nodes(address=url, detail=True, limit=10000, raise_on_missing_output=False)
        usage = _usage(url)
    except Exception as exc:
        raise FleetError("cluster", f"cannot read the cluster's nodes at {url}: {one_line(exc, 300)}") from None
    found = [_host(node, usage.get(node.node_id, {})) for node in nodes]
    return sorted(found, key=lambda h: (not h.alive, not h.head, h.name))


def kinds(hosts_: list[Host]) -> list[Kind]:
    """The places a run can go, from the live hosts: each GPU host, each TPU slice (its hosts
    together), each single TPU host, each host with neither (CPU), then N hosts of one GPU type as
    one place (gpu_groups)."""
    out, slices = [], {}
    for host in (h for h in hosts_ if h.alive):
        if host.tpu_chips and host.slice_name and _slice_hosts(host.tpu_type, host.tpu_chips) > 1:
            slices.setdefault(host.slice_name, []).append(host)
        elif host.tpu_chips:
            out.append(
                Kind(
                    f"tpu:{host.tpu_type or 'TPU'}@{host.name}",
                    f"TPU {host.tpu_type or ''} × {host.tpu_chips} chips on {host.name}".replace("  ", " "),
                    "tpu",
                    (host.name,),
                    (host.node_id,),
                    host.tpu_chips,
                    int(host.free.get("TPU", 0)),
                )
            )
        elif host.gpus:
            out.append(
                Kind(
                    f"gpu:{host.gpu_type or 'GPU'}@{host.name}",
                    f"{host.gpu_type or 'GPU'} × {host.gpus} on {host.name}",
                    "gpu",
                    (host.name,),
                    (host.node_id,),
                    host.gpus,
                    int(host.free.get("GPU", 0)),
                )
            )
        else:
            cpus = int(host.cpus)
            out.append(
                Kind(
                    f"cpu@{host.name}",
                    f"CPU × {cpus} on {host.name}",
                    "cpu",
                    (host.name,),
                    (host.node_id,),
                    cpus,
                    int(host.free.get("CPU", 0)),
                )
            )
    for name, members in slices.items():
        members.sort(key=lambda h: (h.tpu_worker_id is None, h.tpu_worker_id or 0, h.name))
        tpu_type = members[0].tpu_type
        chips = sum(h.tpu_chips for h in members)
        out.append(
            Kind(
                f"tpu:{tpu_type}@{name}",
                f"TPU {tpu_type} slice {name}, {len(members)} hosts",
                "tpu",
                tuple(h.name for h in members),
                tuple(h.node_id for h in members),
                chips,
                int(sum(h.free.get("TPU", 0) for h in members)),
            )
        )
    return out + gpu_groups(hosts_)


GROUP_KEY = re.compile(r"^gpu:(?P<type>[^@]+)@(?P<count>\d+)-hosts$")


def gpu_groups(hosts_: list[Host]) -> list[Kind]:
    """N live hosts of one GPU type as one place, for N from 2 to all of them (past 8: the powers of
    two and all, to keep the Run page's list short; `--on gpu:<type>@<N>-hosts` takes any N)."""
    out = []
    for gpu_type, members in sorted(_by_gpu_type(hosts_).items()):
        everyone = len(members)
        each = min(h.gpus for h in members)
        ready = sum(1 for h in members if h.free.get("GPU", 0.0) >= each)
        for count in range(2, everyone + 1):
            if count <= 8 or count == everyone or count & (count - 1) == 0:
                out.append(
                    Kind(
                        f"gpu:{gpu_type}@{count}-hosts",
                        f"{gpu_type} × {each} on each of {count} hosts",
                        "gpu",
                        tuple(h.name for h in members),
                        tuple(h.node_id for h in members),
                        each * count,
                        each * min(count, ready),
                        host_count=count,
                    )
                )
    return out


def find_kind(found: list[Kind], wanted: str) -> Kind | None:
    """The kind named by its key, its label, a host name or a slice name."""
    for kind in found:
        if wanted in (kind.key, kind.label) or wanted in kind.hosts or kind.key.endswith("@" + wanted):
            return kind
    return _group_of(found, wanted)


def _group_of(found: list[Kind], wanted: str) -> Kind | None:
    """A GPU group that `wanted` names ("gpu:H200@5-hosts") but the list leaves out, made from the
    type's group of all its hosts; FleetError('on') naming what the cluster has when there are not
    that many live hosts of the type; None when `wanted` is no group's name."""
    match = GROUP_KEY.match(wanted.strip())
    if match is None:
        return None
    gpu_type, count = match["type"], int(match["count"])
    prefix = f"gpu:{gpu_type}@"
    groups = [k for k in found if k.host_count and k.key.startswith(prefix)]
    whole = max(groups, key=lambda k: k.host_count, default=None)
    have = len(whole.hosts) if whole else sum(1 for k in found if k.device == "gpu" and k.key.startswith(prefix))
    if count < 2 or whole is None or count > len(whole.hosts):
        asked = f"{count} {gpu_type} hosts asked for" if count >= 2 else "a group of hosts is 2 or more"
        raise FleetError("on", f"{asked}; the cluster has {have} live {gpu_type} host(s); it has: {summary(found)}")
    each = whole.devices // whole.host_count
    ready = whole.free // each if each else 0  # the whole group's free hosts (as gpu_groups counts them)
    return Kind(
        f"{prefix}{count}-hosts",
        f"{gpu_type} × {each} on each of {count} hosts",
        "gpu",
        whole.hosts,
        whole.node_ids,
        each * count,
        each * min(count, ready),
        host_count=count,
    )


def summary(found: list[Kind]) -> str:
    """One line: what the cluster has (for a refusal)."""
    return "; ".join(k.text() for k in found) if found else "no live hosts"


def describe(hosts_: list[Host]) -> list[str]:
    """`dashbench devices --cluster`: a line per host, then the kinds."""
    lines = []
    for h in hosts_:
        parts = [f"CPU {h.cpus:g}"]
        if h.gpus:
            parts.append(f"GPU {h.gpus} × {h.gpu_type or 'unknown type'}")
        if h.tpu_chips:
            tpu = f"TPU {h.tpu_chips} chips ({h.tpu_type or 'unknown type'})"
            if h.slice_name:
                tpu += f", slice {h.slice_name} worker {h.tpu_worker_id}"
            if h.slice_head:
                tpu += f", {h.slice_head}"
            parts.append(tpu)
        free = ", ".join(f"{k} {v:g}" for k, v in h.free.items() if k in ("GPU", "TPU") or k == "CPU")
        state = ("head, " if h.head else "") + ("alive" if h.alive else "DEAD")
        lines.append(
            f"{h.name}  node {h.node_id[:12]}  {state}: {'; '.join(parts)}" + (f"; free: {free}" if h.alive else "")
        )
    found = kinds(hosts_)
    if found:
        lines.append("places a run can go (--on):")
        lines += [f"  {k.key}: {k.text()}" for k in found]
    return lines


def as_dict(host: Host) -> dict:
    return dict(host.__dict__)


# -- internals -----------------------------------------------------------------------------------


def _host(node, used: dict) -> Host:
    res = {k: float(v) for k, v in (node.resources_total or {}).items()}
    labels = node.labels or {}
    gpus, chips = int(res.get("GPU", 0)), int(res.get("TPU", 0))
    gpu_type = (
        next(
            (
                k.split(":", 1)[1]
                for k in res
                if k.startswith("accelerator_type:") and not k.split(":", 1)[1].upper().startswith("TPU")
            ),
            None,
        )
        if gpus
        else None
    )
    gpu_type = gpu_type or (labels.get("ray.io/accelerator-type") if gpus else None)
    head_res = next((k for k in res if k.startswith("TPU-") and k.endswith("-head")), None)
    tpu_type = labels.get("ray.io/tpu-pod-type") or (head_res[4:-5] if head_res else None)
    if chips and not tpu_type:
        tpu_type = next((k.split(":", 1)[1][4:].lower() for k in res if k.startswith("accelerator_type:TPU-")), None)
    worker = labels.get("ray.io/tpu-worker-id")
    free = {}
    for name in ("CPU", "GPU", "TPU"):
        if name in res:
            in_use, total = used.get(name, (0.0, res[name]))
            free[name] = max(0.0, float(total) - float(in_use))
    return Host(
        name=node.node_name or node.node_ip,
        node_id=node.node_id,
        alive=node.state == "ALIVE",
        head=bool(node.is_head_node),
        cpus=res.get("CPU", 0.0),
        gpus=gpus,
        gpu_type=gpu_type,
        tpu_chips=chips,
        tpu_type=tpu_type if chips else None,
        slice_name=labels.get("ray.io/tpu-slice-name") if chips else None,
        tpu_worker_id=int(worker) if chips and worker not in (None, "") else None,
        slice_head=head_res,
        free=free,
        resources=res,
    )


def _by_gpu_type(hosts_: list[Host]) -> dict[str, list[Host]]:
    """Live GPU hosts by their GPU type (a host whose type Ray does not say joins no group), the
    ones with the most GPUs free first."""
    groups: dict[str, list[Host]] = {}
    for host in hosts_:
        if host.alive and host.gpus and host.gpu_type and not host.tpu_chips:
            groups.setdefault(host.gpu_type, []).append(host)
    for members in groups.values():
        members.sort(key=lambda h: (-h.free.get("GPU", 0.0), h.name))
    return groups


def _slice_hosts(tpu_type: str | None, chips_per_host: int) -> int:
    """How many hosts a slice type spans (v4-16: 8 chips at 4 a host, 2), from dashbench.hardware.tpu's chips."""
    from dashbench.hardware import tpu

    chips = tpu.parse(tpu_type).chips
    return max(1, -(-chips // chips_per_host)) if chips and chips_per_host else 1


def _usage(url: str) -> dict:
    """node id → {resource: (in use, total)} from the dashboard's cluster status."""
    with urllib.request.urlopen(f"{url}/api/cluster_status", timeout=10) as resp:
        data = json.load(resp)
    report = ((data.get("data") or {}).get("clusterStatus") or {}).get("loadMetricsReport") or {}
    by_node = report.get("usageByNode") or {}
    return {node: {k: tuple(v) for k, v in usage.items()} for node, usage in by_node.items()}
