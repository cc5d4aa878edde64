"""Compare's computed parts — speed-ups per workload, one section of charts per workload, the table
and its CSV — each a plain function of the compare frame, so the page can build them once per store
version and choice (ui.memo) and a rerun that changed nothing only draws them."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dashbench.views import charts, compare
from dashbench.views.samples import step_samples


def with_speedups(frame: pd.DataFrame, baseline: str | None) -> tuple[pd.DataFrame, dict]:
    """(frame with `speedup`, {group: its baseline id or None}): each workload (and shape) against its
    own baseline, the chosen one in its group and the group's first run elsewhere."""
    groups = compare.workload_groups(frame)
    bases = {name: compare.group_baseline(rows, baseline) for name, rows in groups}
    out = frame.assign(speedup=float("nan"))
    for name, rows in groups:
        if bases[name]:
            out.loc[rows.index, "speedup"] = compare.speedup_vs(rows, bases[name])["speedup"]
    return out, bases


@dataclass
class Section:
    """One workload's charts (a figure is None where there is nothing to draw)."""

    name: str
    sweep: object
    throughput: object
    speedup: object
    steps: object
    cost: object


def sections(frame: pd.DataFrame, bases: dict, labels: dict, store) -> list[Section]:
    """The charts of every workload group of a frame from with_speedups; `store` answers samples()."""
    out = []
    groups = compare.group_of(frame)
    for name in dict.fromkeys(groups):
        rows = frame[groups == name]
        sweeps = compare.sweep_frame(rows)
        base = bases.get(name)
        measured = rows[rows["kind"] == "measured"]
        out.append(Section(
            name=name,
            sweep=charts.throughput_vs_batch(sweeps) if not sweeps.empty else None,
            throughput=charts.throughput(rows),
            speedup=charts.speedup(rows, labels.get(base, "—") if base else "—"),
            steps=charts.step_time_distribution(step_samples(store, measured)) if not measured.empty else None,
            cost=charts.cost_per_million(rows),
        ))
    return out
