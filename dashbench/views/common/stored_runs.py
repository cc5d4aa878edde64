"""Stored runs as more than one page shows them: the filter widgets' store query (Compare, Results), one
run's detail (Results, and Run's finished runs) and its accuracy curve (Results). No Streamlit here."""

from __future__ import annotations

from typing import Any, Iterable, Optional

import pandas as pd

from dashbench.views.common import accuracy_charts
from dashbench.views.common.format import run_label


def query(selections: dict[str, Iterable] | None, search: str = "") -> dict:
    """The Store.runs filters of the filter widgets: the non-empty selections and the search text."""
    out = {column: list(chosen) for column, chosen in (selections or {}).items() if chosen}
    if (search or "").strip():
        out["search"] = search.strip()
    return out


def run_detail(run: dict) -> dict:
    """What the detail view shows for one stored run: headline figures, flags explained, environment."""
    result = run.get("result")
    values = result.to_dict() if result is not None else {}
    spec = run.get("spec") or {}
    return {
        "title": run_label(
            {
                **spec,
                **values,
                "run_id": run.get("run_id"),
                "label": run.get("label"),
                "batch_size": values.get("global_batch_size") or spec.get("batch_size"),
            }
        ),
        "status": run.get("status"),
        "error": run.get("error"),
        "headline": result.figures() if result is not None else [],
        # Each note names its flag in words ("contended: other processes …"): shown as it is, no prefix.
        "flags": [note for _flag, note in result.flag_notes()] if result is not None else [],
        "env": values.get("env") or {},
        "placement": values.get("placement") or {},
        "spec": spec,
        "unreadable": run.get("unreadable"),  # "field: why" when part of the stored run could not be read
    }


def accuracy_of(result: Any) -> Optional[dict]:
    """The stored accuracy block of a result (a RunResult or its dict), None for a throughput-only run."""
    if result is None:
        return None
    if isinstance(result, dict):
        block = result.get("accuracy")
    else:
        block = getattr(result, "accuracy", None)
    return block if isinstance(block, dict) and isinstance(block.get("runs"), list) else None


def run_curve(run: dict):
    """Results' chart of one stored run's curve, None for a throughput-only run."""
    block = accuracy_of(run.get("result")) if run else None
    return accuracy_charts.run_curve(block) if block is not None else None


def curve_table(run: dict) -> pd.DataFrame:
    """One row per evaluation and seed of a stored run (empty for a throughput-only run)."""
    block = accuracy_of(run.get("result")) if run else None
    rows = [{"seed": r.get("seed"), **point} for r in (block or {}).get("runs", []) for point in r.get("curve") or []]
    return pd.DataFrame(rows, columns=["seed", "epoch", "step", "wall_s", "train_loss", "val_loss", "val_accuracy"])
