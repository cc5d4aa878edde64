"""Filter widgets' options and the filtering behind them (Compare and Results)."""

from __future__ import annotations

from typing import Iterable

import pandas as pd

FILTER_COLUMNS = ("model", "backend", "accelerator", "precision", "batch_size", "status", "label")


def filter_options(runs: pd.DataFrame) -> dict[str, list]:
    """Distinct values per filterable column, in a stable order for multiselects."""
    options = {}
    for column in FILTER_COLUMNS:
        if column in runs:
            values = [v for v in runs[column].dropna().unique().tolist() if v != ""]
            options[column] = sorted(values, key=lambda v: (str(type(v)), v))
    return options


def apply_filters(runs: pd.DataFrame, selections: dict[str, Iterable] | None, text: str = "") -> pd.DataFrame:
    """Keep rows matching every non-empty selection (an empty selection means 'all') and a free-text search."""
    out = runs
    for column, chosen in (selections or {}).items():
        chosen = list(chosen or [])
        if chosen and column in out:
            out = out[out[column].isin(chosen)]
    text = (text or "").strip().lower()
    if text and not out.empty:
        hits = [text in " ".join(map(str, row)).lower() for row in out.itertuples(index=False)]
        out = out[hits]
    return out

