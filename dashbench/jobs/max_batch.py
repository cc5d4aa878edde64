"""`sweep --find-max-batch` as a background process, for the Run page's "Find the largest batch"
button, and the search's answer in words (shared with the command).

Started detached (its own session), as runs and machine checks are: the search goes on and its
tries land in the store even if the dashboard restarts; its output (the --json summary at the end)
goes to a log beside the database. One search per database at a time. No TensorFlow here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Optional

from dashbench.core.spec import SPEC_DEFAULTS, RunSpec
from dashbench.jobs.background import db_key
from dashbench.jobs.checks import start_detached
from dashbench.workloads import model_file

# The command before its options; a module attribute so tests can put a stand-in behind it.
SWEEP_COMMAND = [sys.executable, "-m", "dashbench", "sweep", "--find-max-batch"]
_searches: dict[str, tuple[subprocess.Popen, Path, str]] = {}  # resolved db -> (process, log, model)
_lock = threading.Lock()


def argv_for(spec: RunSpec) -> list[str]:
    """The spec as `sweep` options (its batch size as --start-batch; steps and warm-up left to the
    search's few unless the spec changed them from their defaults). A model file is named with the
    hash it had when the search was asked for: the sweep refuses to start on a file changed since."""
    out = ["--model", model_file.argument(spec), "--start-batch", str(spec.batch_size)]
    if spec.model_path and spec.model_sha256:
        out += ["--expect-sha256", spec.model_sha256]
    for name, value in spec.to_dict().items():
        if (
            name in ("model", "batch_size", "model_path", "model_sha256")
            or value is None
            or value == SPEC_DEFAULTS.get(name)
        ):
            continue
        option = "--" + name.replace("_", "-")
        out += [option] if value is True else [] if value is False else [option, str(value)]
    return out


def launch(spec: RunSpec, db_path=None) -> int:
    """Start the search for this database unless one is already going; returns its pid."""
    db = db_key(db_path)
    with _lock:
        current = _searches.get(db)
        if current is not None and current[0].poll() is None:
            return current[0].pid
        proc, log_path = start_detached([*SWEEP_COMMAND, *argv_for(spec)], db, "find-max-batch")
        _searches[db] = (proc, log_path, spec.model)
        return proc.pid


def state(db_path=None) -> Optional[dict]:
    """The latest search this process started for the database: running, its exit code, its model,
    and once ended its summary (the command's --json object) where its log holds one; None if none."""
    with _lock:
        current = _searches.get(db_key(db_path))
    if current is None:
        return None
    proc, log_path, model = current
    code = proc.poll()
    return {
        "running": code is None,
        "returncode": code,
        "model": model,
        "log_path": str(log_path),
        "summary": None if code is None else _summary(log_path),
    }


def _summary(log_path: Path) -> Optional[dict]:
    """The JSON object the command printed last (its lines start at the margin with "{")."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for start in range(len(lines) - 1, -1, -1):
        if lines[start].startswith("{"):
            try:
                found = json.loads("\n".join(lines[start:]))
            except ValueError:
                return None
            return found if isinstance(found, dict) else None
    return None


def summarise(points: dict[int, dict], largest: Optional[int], wall: Optional[int], top: int) -> dict:
    """The search's answer: the largest batch that fits, the OOM wall, the batch with the best
    throughput per dollar (examples/s over the price per hour: on one device, the best examples/s)."""
    done = [p for p in points.values() if p["status"] == "done" and isinstance(p.get("examples_per_sec"), (int, float))]
    best = max(done, key=lambda p: p["examples_per_sec"], default=None)
    at_largest = points.get(largest) if largest is not None else None
    share = None
    if (
        best
        and at_largest
        and isinstance(at_largest.get("examples_per_sec"), (int, float))
        and best["examples_per_sec"]
    ):
        share = at_largest["examples_per_sec"] / best["examples_per_sec"]
    return {
        "max_batch_size": largest,
        "oom_batch_size": wall,
        "bound": top,
        "bound_reached": wall is None and largest == top,
        "best_value_batch_size": best["batch_size"] if best else None,
        "max_batch_throughput_share": share,
        "points": [points[b] for b in sorted(points)],
    }


def summary_lines(summary: dict) -> list[str]:
    largest, wall = summary.get("max_batch_size"), summary.get("oom_batch_size")
    lines = [f"sweep {summary.get('sweep_id')}: {len(summary.get('points') or [])} tries"]
    if largest is None:
        lines.append(f"no batch fits: batch {wall} ran out of memory" if wall else "no try finished")
    elif summary.get("bound_reached"):
        lines.append(f"largest batch that fits: {largest} (the --max-batch bound; larger was not tried)")
    else:
        lines.append(f"largest batch that fits: {largest}" + (f" (batch {wall} ran out of memory)" if wall else ""))
    best = summary.get("best_value_batch_size")
    if best is not None:
        share = summary.get("max_batch_throughput_share")
        lines.append(
            f"best throughput per dollar: batch {best}"
            + (
                f"; the largest batch gives {share:.0%} of its throughput"
                if share is not None and best != largest
                else ""
            )
        )
    return lines
