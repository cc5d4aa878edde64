"""Predict's table as first shown: the figures a device is chosen by, each column as wide as its header and
its longest cell, so that the table reads without scrolling sideways at a 1400 px window; the step time, the
spot price and where the calibration came from stay in the full table below it.

Plain data, no Streamlit: the page draws what `headline` returns."""

from __future__ import annotations

import pandas as pd

from dashbench.views.common.columns import cells_px, text_px

FOLDED = ("step", "$/M spot", "calibration")  # in the full table only


def widths(table: pd.DataFrame) -> dict[str, int]:
    """Each column's px width: its header and its longest cell whole."""
    return {name: max(text_px(str(name)), cells_px(table[name])) for name in table.columns}


def headline(table: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, int]]:
    """words.frame's table without FOLDED's columns, and the widths its columns are drawn at."""
    shown = table[[c for c in table.columns if c not in FOLDED]]
    return shown, widths(shown)
