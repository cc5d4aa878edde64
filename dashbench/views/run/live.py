"""What the Run page's refreshing panel draws for a queued or running run (from jobs.progress)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from dashbench.results.result import phase_text
from dashbench.store import TERMINAL, WITH_RESULT
from dashbench.views.common.format import is_number, md_text
from dashbench.views.common.samples import prepare_samples


@dataclass
class LiveView:
    """What the live fragment draws for one run, computed from jobs.progress()."""

    status: str
    fraction: float
    text: str  # markdown: stored parts (phase, status) escaped
    samples: pd.DataFrame
    finished: bool
    error: str | None = None


def live_view(progress: dict | None) -> LiveView:
    """Plain function behind the refreshing fragment (AppTest has no timer, so it is tested directly)."""
    progress = progress or {}
    status = str(progress.get("status") or "unknown")
    fraction = progress.get("fraction")
    fraction = min(1.0, max(0.0, float(fraction))) if is_number(fraction) else 0.0
    if status in WITH_RESULT:
        fraction = 1.0
    samples = prepare_samples(progress.get("samples"))
    measured = samples[~samples["warmup"]]
    if status == "queued":
        text = "queued: waiting for the device to be free"
        position = progress.get("queue_position")
        if is_number(position):
            ahead = int(position) - 1  # the position counts the run now on the device
            text += f" ({ahead} run{'s' if ahead != 1 else ''} ahead)"
    elif status == "running" and str(progress.get("phase") or "").startswith("waiting for the device"):
        text = md_text(progress["phase"])  # another run holds the device (jobs/device_lock.py): no steps yet
    elif status == "running" and evaluation_fraction(progress.get("phase")) is not None:
        # A to-accuracy run's last evaluation ("seed 2/3 · epoch 3 of ≤ 20: validation accuracy 0.874"):
        # its steps are not the measured steps of a throughput run, so the epochs give the bar.
        text = f"running: {md_text(progress['phase'])}"
        fraction = evaluation_fraction(progress["phase"])
    elif status == "running":
        phase = progress.get("phase")
        text = f"running ({md_text(phase_text(phase, progress.get('backend')))})" if phase else "running"
        done, total = progress.get("steps_done"), progress.get("steps_total")
        if is_number(done) and is_number(total):
            text += f": step {int(done)} of {int(total)}"
        if not measured.empty:
            text += f", last step {measured['step_time_s'].iloc[-1] * 1000:.1f} ms"
            if is_number(measured["loss"].iloc[-1]):
                text += f", loss {measured['loss'].iloc[-1]:.4g}"
        live = progress.get("examples_per_sec_live")
        if is_number(live):
            text += f", {live:,.1f} examples/s so far"
    else:
        text = md_text(status) + END_WORDS.get(status, "")
    return LiveView(
        status=status,
        fraction=fraction,
        text=text,
        samples=samples,
        finished=status in TERMINAL,
        error=progress.get("error"),
    )


END_WORDS = {"oom": ": out of memory", "not_reached": ": trained to the end without reaching its target"}
# accuracy.progress_text's line: "[seed 2/3 · ]epoch 3[.5] of [≤ ]20: validation accuracy 0.874" (or loss).
_EVALUATION = re.compile(
    r"^(?:seed (\d+)/(\d+) · )?epoch ([\d.e-]+)(?: of (?:≤ )?(\d+))?: validation (?:accuracy|loss)"
)


def evaluation_fraction(phase) -> float | None:
    """How far a to-accuracy run is, from its last evaluation's line (seeds and epochs done of the
    most it may train); 0 where the line has no bound; None when `phase` is not such a line."""
    match = _EVALUATION.match(str(phase or ""))
    if match is None:
        return None
    seed, seeds, epoch, limit = match.groups()
    if not limit or float(limit) <= 0:
        return 0.0
    seeds_done, total = (int(seed) - 1, int(seeds)) if seeds else (0, 1)
    return max(0.0, min(1.0, (seeds_done + min(float(epoch) / float(limit), 1.0)) / max(total, 1)))


def running_first(active):
    """The active runs as the live panel lists them: what is measuring now, then the queue in order."""
    if active.empty:
        return active
    order = (active["status"] != "running").astype(int)
    return active.assign(_order=order).sort_values(["_order", "created_at"], kind="stable").drop(columns="_order")
