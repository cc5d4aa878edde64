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
    """Per-step times of every measured sample of the measured rows, labelled for the chart."""
    parts = []
    for _, row in frame.iterrows():
        if row.get("kind") != "measured":
            continue
        samples = prepare_samples(store.samples(row["run_id"]))
        samples = samples[~samples["warmup"]]
        if not samples.empty:
            parts.append(samples.assign(label=row["label"], run_id=row["run_id"]))
    if not parts:
        return pd.DataFrame(columns=["label", "run_id", "index", "steps", "duration_s", "loss", "warmup",
                                     "step_time_s"])
    return pd.concat(parts, ignore_index=True)

