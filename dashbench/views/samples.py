"""Per-loop samples of stored runs, shaped for the step-time and loss charts."""

from __future__ import annotations

import pandas as pd

def prepare_samples(samples: pd.DataFrame | list | None) -> pd.DataFrame:
    """Samples (engine events or store rows) → a frame with step_time_s = duration / steps."""
    df = samples.copy() if isinstance(samples, pd.DataFrame) else pd.DataFrame(samples or [])
    for column, default in (("index", 0), ("steps", 1), ("duration_s", float("nan")), ("loss", float("nan")),
                            ("warmup", False)):
        if column not in df:
            df[column] = default
    df["warmup"] = df["warmup"].fillna(False).astype(bool)
    steps = pd.to_numeric(df["steps"], errors="coerce").where(lambda s: s > 0)
    df["step_time_s"] = pd.to_numeric(df["duration_s"], errors="coerce") / steps
    df["loss"] = pd.to_numeric(df["loss"], errors="coerce")
    return df.sort_values("index").reset_index(drop=True)



def step_samples(store, frame: pd.DataFrame) -> pd.DataFrame:
    """Per-step times of every measured sample of the measured rows (one query for all of them),
    labelled for the chart, runs in the frame's order."""
    measured = frame[frame["kind"] == "measured"] if "kind" in frame else frame.iloc[0:0]
    ids = list(dict.fromkeys(measured["run_id"]))
    samples = prepare_samples(store.samples(ids)) if ids else pd.DataFrame()
    if samples.empty or "run_id" not in samples:
        return pd.DataFrame(columns=["label", "run_id", "index", "steps", "duration_s", "loss", "warmup",
                                     "step_time_s"])
    samples = samples[~samples["warmup"]]
    order = {run_id: i for i, run_id in enumerate(ids)}
    labels = dict(zip(measured["run_id"], measured["label"]))
    samples = samples.assign(label=samples["run_id"].map(labels), _order=samples["run_id"].map(order))
    return samples.sort_values(["_order", "index"], kind="stable").drop(columns="_order").reset_index(drop=True)
