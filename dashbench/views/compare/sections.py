"""Compare's computed parts — speed-ups per workload, one section of charts per workload, the table
and its CSV — each a plain function of the compare frame, so the page can build them once per store
version and choice (ui.memo) and a rerun that changed nothing only draws them."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from dashbench.core.frames import records
from dashbench.views.common import charts, sample_charts
from dashbench.views.common.format import cost_unit, is_missing, is_number, md_text
from dashbench.views.common.samples import step_samples
from dashbench.views.compare import numbers as compare


def with_speedups(frame: pd.DataFrame, baseline: str | None) -> tuple[pd.DataFrame, dict]:
    """(frame with `speedup`, {group: its baseline id or None}): each workload (and shape) against its
    own baseline, the chosen one in its group and the group's first run elsewhere. Rows as dicts: a
    frame per group is paid on every choice."""
    columns = [c for c in ("id", "kind", "examples_per_sec", "label", "seeds") if c in frame]
    rows = records(frame[columns])
    groups = compare.group_of(frame).tolist()
    members: dict = {}
    for row, name in zip(rows, groups):
        members.setdefault(name, []).append(row)
    bases = {name: compare.baseline_of(group, baseline) for name, group in members.items()}
    throughput = {row["id"]: row.get("examples_per_sec") for row in rows}
    labels = {row["id"]: row.get("label") for row in rows}
    speedups, against = [], []
    for row, name in zip(rows, groups):
        base = throughput.get(bases[name]) if bases[name] else None
        eps = row.get("examples_per_sec")
        ok = is_number(base) and base > 0 and not is_missing(eps)
        speedups.append(eps / float(base) if ok else float("nan"))
        # Each row names its baseline: the table's sections each have their own, and 1.00× reads alike in all.
        against.append(labels.get(bases[name]) if ok else None)
    return frame.assign(speedup=speedups, speedup_vs=against), bases


def table_parts(table: pd.DataFrame, frame: pd.DataFrame, bases: dict) -> list[tuple[str, pd.DataFrame]]:
    """compare_table's rows split by workload section (the frame's groups, in the table's row order), each
    with the line that heads it: the workload and its speed-up baseline. One part, headed "", for one section."""
    groups = compare.group_of(frame).tolist()
    names = list(dict.fromkeys(groups))
    if len(names) < 2:
        return [("", table)]
    labels = dict(zip(frame["id"], frame["label"])) if "label" in frame else {}
    parts = []
    for name in names:
        rows = table[[g == name for g in groups]].reset_index(drop=True)
        base = labels.get(bases.get(name))
        head = f"**{md_text(name)}**" + (f" · speed-up against {md_text(base)}" if base else " · no speed-up")
        parts.append((head, rows))
    return parts


def with_memory(frame: pd.DataFrame, store) -> pd.DataFrame:
    """The frame with each measured run's peak memory (memory.MEMORY_COLUMNS) and to-accuracy columns
    (accuracy_text.ACCURACY_COLUMNS) from its stored result; `store` answers get_run(). Published rows
    have none."""
    from dashbench.results import accuracy_text
    from dashbench.workloads import memory

    def result_of(row):
        if row.get("kind") != "measured" or not isinstance(row.get("run_id"), str):
            return None
        run = store.get_run(row["run_id"])
        return run["result"] if run else None

    results = [result_of(row) for row in records(frame[[c for c in ("kind", "run_id") if c in frame]])]
    # And a to-accuracy run's target, seeds reached and time to target (the table and its CSV).
    columns = {**memory.memory_columns(results), **accuracy_text.accuracy_columns(results)}
    return frame.assign(
        **{
            name: pd.to_numeric(pd.Series(values, index=frame.index, dtype=object), errors="coerce")
            for name, values in columns.items()
        }
    )


def oom_walls(store, sweeps: pd.DataFrame) -> dict:
    """{sweep id: the smallest batch of it that ran out of memory} for the sweeps among `sweeps`."""
    ids = sorted({s for s in sweeps.get("sweep_id", pd.Series(dtype=object)).dropna() if isinstance(s, str)})
    if not ids:
        return {}
    ooms = store.runs(sweep_id=ids, status="oom")
    return {sweep: int(group["batch_size"].min()) for sweep, group in ooms.groupby("sweep_id")}


CHART_COLUMNS = (
    "id",
    "run_id",
    "kind",
    "label",
    "group",
    "examples_per_sec",
    "speedup",
    "flag_text",
    "usd_per_million_examples",
    "usd_per_million_examples_spot",
    "batch_size",
    "sweep_id",
    "backend",
    "model",
    "accelerator",
    "precision",
    "xla",
    "image_size",
    "seq_len",
    "width",
    "peak_memory_bytes",
    "window_peak_memory_bytes",
    "memory_capacity_bytes",
    "memory_estimate_bytes",
)


# A section's charts, in the order they are drawn, and those drawn until a visitor picks others: every chart
# drawn cost a new visitor's server its Plotly JSON and message, and its software-rendered browser (the server
# idles on while it draws) seconds; speed-up is throughput over the baseline's, and the table holds every figure.
CHARTS = {
    "sweep": "Batch-size sweep",
    "throughput": "Throughput",
    "cost": "Cost per 1M examples or tokens",
    "speedup": "Speed-up",
    "steps": "Step times",
    "memory": "Peak memory",
}
DEFAULT_CHARTS = ("throughput", "cost")


@dataclass
class Section:
    """One workload's charts (a figure is None where there is nothing to draw or it was not asked for)."""

    name: str
    sweep: object
    throughput: object
    speedup: object
    steps: object
    cost: object
    memory: object = None  # peak memory per run, the device's memory as a line (None: none measured)


def _has_memory(measured: pd.DataFrame) -> bool:
    return "peak_memory_bytes" in measured and measured["peak_memory_bytes"].notna().any()


def chart_kinds(frame: pd.DataFrame) -> list[str]:
    """The CHARTS keys some workload section of this frame has something to draw for, in CHARTS order."""
    frame = frame[[c for c in CHART_COLUMNS if c in frame]]
    measured = frame[frame["kind"] == "measured"]
    found = {"throughput", "cost", "speedup"}
    if not measured.empty:
        found.add("steps")
    if _has_memory(measured):
        found.add("memory")
    groups = compare.group_of(frame)
    if any(not compare.sweep_frame(frame[groups == name]).empty for name in dict.fromkeys(groups)):
        found.add("sweep")
    return [kind for kind in CHARTS if kind in found]


def sections(frame: pd.DataFrame, bases: dict, labels: dict, store, kinds=tuple(CHARTS)) -> list[Section]:
    """The charts of every workload group of a frame from with_speedups, those of `kinds` (CHARTS keys)
    only; `store` answers samples()."""
    out = []
    # Only what the charts read: every row selection below copies each column it carries.
    frame = frame[[c for c in CHART_COLUMNS if c in frame]]
    groups = compare.group_of(frame)
    for name in dict.fromkeys(groups):
        rows = frame[groups == name]
        sweeps = compare.sweep_frame(rows) if "sweep" in kinds else rows.iloc[0:0]
        base = bases.get(name)
        measured = rows[rows["kind"] == "measured"]
        unit = cost_unit(rows["model"] if "model" in rows else ())  # one workload a section: one unit
        unit = unit if unit in ("examples", "tokens") else "examples"
        figures = dict(
            sweep=charts.throughput_vs_batch(sweeps, oom_walls(store, sweeps)) if not sweeps.empty else None,
            throughput=charts.throughput(rows, unit) if "throughput" in kinds else None,
            speedup=charts.speedup(rows, labels.get(base, "—") if base else "—") if "speedup" in kinds else None,
            steps=sample_charts.step_time_distribution(step_samples(store, measured))
            if "steps" in kinds and not measured.empty
            else None,
            cost=charts.cost_per_million(rows) if "cost" in kinds else None,
            memory=charts.peak_memory(measured) if "memory" in kinds and _has_memory(measured) else None,
        )
        # Kept (ui.memo) and drawn by every session with this choice: each figure's dict made once.
        out.append(Section(name=name, **{kind: charts.shared(figure) for kind, figure in figures.items()}))
    return out
