"""The Run page's "figures on this machine" line: the host's last `dashbench doctor` verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field

from dashbench.store import iso, this_host

NEVER_CHECKED = "Figures on this machine were never checked — run the check (`python -m dashbench doctor`)."
_RANK = {"ok": 0, "warning": 1, "error": 2}
LEVELS = {"ok": "success", "warning": "warning", "error": "error", None: "info"}


@dataclass
class MachineCheck:
    """What the page shows: one line, its level (a Streamlit call: success | warning | error | info),
    the verdict (None: never checked), and a line per device and backend checked."""

    text: str
    level: str
    verdict: str | None = None
    checked_at: float | None = None
    details: list[str] = field(default_factory=list)


def machine_check(store, host: str | None = None) -> MachineCheck:
    """The newest verdict of each device and backend checked on `host` (this machine), the worst
    of them, and the date of the newest."""
    host = host or this_host()
    latest: dict[tuple, dict] = {}
    for row in store.calibrations(host):  # newest first
        latest.setdefault((row["device"], row["backend"]), row)
    if not latest:
        return MachineCheck(NEVER_CHECKED, LEVELS[None])
    rows = list(latest.values())
    verdict = max((r["verdict"] for r in rows), key=lambda v: _RANK.get(v, 2))
    newest = max(r["created_at"] for r in rows)
    date = (iso(newest) or "")[:16].replace("T", " ") + " UTC"
    details = []
    for row in sorted(rows, key=lambda r: (r["device"], r["backend"])):
        peak = row["peaks"].get("float32")
        ratio = row["stopwatch_ratio"]
        parts = [f"{row['device']} · {row['backend']}: {row['verdict']}"]
        if peak is not None:
            parts.append(f"float32 matmul {peak:.4g} TFLOP/s")
        if ratio is not None:
            parts.append(f"stopwatch {ratio:.3f}×")
        details.append(", ".join(parts) + "".join(f"; {reason}" for reason in row["reasons"]))
    return MachineCheck(
        f"Figures on this machine last checked {date}: {verdict}",
        LEVELS.get(verdict, "error"),
        verdict,
        newest,
        details,
    )


def check_progress(state: dict | None, log_tail: str = "") -> str | None:
    """A line about a check started from this dashboard: running, or how it failed; None otherwise."""
    if state is None:
        return None
    if state["running"]:
        return "Checking this machine… (`dashbench doctor`: a few minutes; the result shows here when it lands)"
    if state["returncode"] not in (0, 1):
        return f"The check failed (exit code {state['returncode']}): {log_tail or 'no output'}"
    return None
