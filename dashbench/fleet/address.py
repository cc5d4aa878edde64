"""Where the cluster is: `--cluster ADDRESS` or $RAY_ADDRESS, in the forms Ray's users type.

- `ray://HOST:10001`: Ray Client's address on the head;
- `http://HOST:8265` or `https://…`: the head's dashboard, which serves the Jobs API;
- `HOST:6379`: the head's GCS (what `ray start --address` takes), and `auto` for a cluster this
  machine belongs to.
Every form reaches the same Jobs API: Ray's JobSubmissionClient finds the dashboard from a Ray Client
or GCS address (a slow connection, made once per process and address).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from dashbench.fleet import FleetError

ACCEPTED = (
    "ray://HOST:10001 (Ray Client), http://HOST:8265 or https://HOST:8265 (the Jobs API), "
    "HOST:6379 (the head's GCS) or auto"
)
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")


@dataclass(frozen=True)
class ClusterAddress:
    text: str  # as given, normalised (no trailing slash)
    kind: str  # "client", "jobs" or "gcs"

    def __str__(self) -> str:
        return self.text


def parse(text: str | None, env: dict | None = None) -> ClusterAddress:
    """The cluster's address from `text`, or $RAY_ADDRESS when `text` is empty or None.
    Anything else than the accepted forms: FleetError('cluster', …) naming them."""
    given = (text or "").strip() or (os.environ if env is None else env).get("RAY_ADDRESS", "").strip()
    if not given:
        raise FleetError(
            "cluster", f"no cluster address: give --cluster ADDRESS or set RAY_ADDRESS; accepted forms: {ACCEPTED}"
        )
    given = given.rstrip("/")
    if given == "auto":
        return ClusterAddress(given, "gcs")
    scheme, sep, rest = given.partition("://")
    if not sep:
        if _port_ok(_HOST_PORT.match(given)):
            return ClusterAddress(given, "gcs")
        raise FleetError("cluster", f"{given!r} is not a cluster address; accepted forms: {ACCEPTED}")
    kind = {"ray": "client", "http": "jobs", "https": "jobs"}.get(scheme.lower())
    if kind is None or not _port_ok(_HOST_PORT.match(rest)):
        raise FleetError("cluster", f"{given!r} is not a cluster address; accepted forms: {ACCEPTED}")
    return ClusterAddress(f"{scheme.lower()}://{rest}", kind)


def _port_ok(match) -> bool:
    return bool(match) and 0 < int(match.group(2)) < 65536


# A Ray Client address costs the head a server process per connection (Ray's proxier starts one for each
# session): on a busy head that process can miss the proxy's wait, and with grpcio 1.81-1.85 on the head it
# can die before its exec (tests/fleet/test_grpc_fork.py); Ray says so in a traceback.
# Each of these is a start that may go through on another try; anything else is not retried.
CLIENT_TRIES = 3
CLIENT_START_FAILED = (
    "Starting Ray client server failed",
    "Proxy failed to Connect to backend",
    "Server startup failed",
    "ray client connection timeout",
    # The proxy's own start of the session raised (its traceback follows), or the session it started
    # ended before the first request: both a start on a busy head, not a refusal.
    "Initialization failure from server",
    "the Ray client has already been disconnected",
)


def client_start_failed(text: str) -> bool:
    """Whether Ray's error `text` is a Ray Client session the head did not start (worth another try)."""
    return any(marker in text for marker in CLIENT_START_FAILED)


def client_retry_line(address: ClusterAddress) -> str:
    """What a user on a busy head is told after CLIENT_TRIES failed starts: what to retry, in one line."""
    host = address.text.partition("://")[2].rsplit(":", 1)[0]
    return (
        f"the head at {address} did not start a Ray Client session in {CLIENT_TRIES} tries (a busy head is slow "
        "to start its server, and a head with grpcio 1.81 to 1.85 loses some as they start: "
        "requirements-cluster.txt pins one that does not): run the command again, or give the Jobs API address "
        f"(--cluster http://{host}:8265), which needs no Ray Client server"
    )


# Ray's client waits this long (30 s by default) to reconnect a session the head ended, as it ends one it
# failed to start: each failed try would cost half a minute. A session here is short and started afresh.
CLIENT_GRACE_ENV = "RAY_CLIENT_RECONNECT_GRACE_PERIOD"


def client_env(env: dict) -> dict:
    """`env` for a Ray Client session of dashbench's: no reconnect wait, unless the user set one."""
    return {CLIENT_GRACE_ENV: "0", **env}
