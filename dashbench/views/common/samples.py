"""Per-loop samples of stored runs, shaped for the step-time and loss charts."""

from __future__ import annotations

import pandas as pd

from dashbench.core.frames import records
from dashbench.views.common.format import is_missing, is_number


def prepare_samples(samples: pd.DataFrame | list | None) -> pd.DataFrame:
    """Samples (engine events or store rows) → a frame with step_time_s = duration / steps."""
    df = samples.copy() if isinstance(samples, pd.DataFrame) else pd.DataFrame(samples or [])
    for column, default in (
        ("index", 0),
        ("steps", 1),
        ("duration_s", float("nan")),
        ("loss", float("nan")),
        ("warmup", False),
    ):
        if column not in df:
            df[column] = default
    df["warmup"] = df["warmup"].fillna(False).astype(bool)
    steps = pd.to_numeric(df["steps"], errors="coerce").where(lambda s: s > 0)
    df["step_time_s"] = pd.to_numeric(df["duration_s"], errors="coerce") / steps
    df["loss"] = pd.to_numeric(df["loss"], errors="coerce")
    return df.sort_values("index").reset_index(drop=True)


STEP_COLUMNS = ["label", "run_id", "index", "steps", "duration_s", "loss", "warmup", "step_time_s"]


def step_samples(store, frame: pd.DataFrame) -> pd.DataFrame:
    """Per-step times of the measured samples of the measured rows, labelled for the chart, runs in the
    frame's order: each loop's, or for a run of more loops than a chart draws, each bucket's mean
    (Store.sample_buckets, summed in SQL). Row by row: prepare_samples' column operations were a
    visible share of every change of Compare's choice (docs/history/performance.md)."""
    measured = frame[frame["kind"] == "measured"] if "kind" in frame else frame.iloc[0:0]
    ids = list(dict.fromkeys(measured["run_id"]))
    stored = store.sample_buckets(ids, measured_only=True) if ids else None
    if stored is None or len(stored) == 0 or "run_id" not in stored:
        return pd.DataFrame(columns=STEP_COLUMNS)
    order = {run_id: i for i, run_id in enumerate(ids)}
    labels = dict(zip(measured["run_id"], measured["label"]))
    rows = []
    for row in records(stored):
        if bool(row.get("warmup")) and not is_missing(row.get("warmup")):
            continue
        steps, duration = row.get("steps", 1), row.get("duration_s")
        ok = is_number(steps) and steps > 0 and is_number(duration)
        rows.append(
            dict(
                row, label=labels.get(row["run_id"]), warmup=False, step_time_s=duration / steps if ok else float("nan")
            )
        )
    rows.sort(key=lambda r: (order.get(r["run_id"], len(order)), r.get("index", 0)))
    return pd.DataFrame(rows, columns=list(dict.fromkeys([*STEP_COLUMNS, *(k for r in rows[:1] for k in r)])))
