"""The numbers table as Compare first shows it: the figures a row is read for, narrow enough to read
without scrolling sideways at a 1400 px window. What the other columns hold is not lost: the value every
row shares is said once in a caption line, and the full table (and its CSV) keeps every column.

Plain data, no Streamlit: the page draws what headline_parts returns."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from dashbench.views.common.columns import COLUMNS, fitted_width
from dashbench.views.common.format import cost_help, is_missing, md_text

# A row's name and what it is read for (columns.MUST_SEE and its speed-up), in compare_table's order.
HEADLINE = ("label", "examples_per_sec", "speedup", "mfu", "usd_per_million_examples", "flags")
# Figures whose absence a reader would look for: said in the caption when no row has one.
FIGURES = ("examples_per_sec", "mfu", "usd_per_million_examples")
# Never "the same on every row": the run's own name and id, when it was made, whom its speed-up is over
# (said once as the baseline instead).
NOT_SHARED = ("label", "run_id", "created_at", "speedup_vs")


@dataclass(frozen=True)
class Headline:
    """One section's table as first shown, the line under it, and the hints its columns take."""

    table: pd.DataFrame
    caption: str  # markdown; "" when there is nothing to say
    hints: dict = field(default_factory=dict)
    widths: dict = field(default_factory=dict)  # column -> px, where this table's own rows set it


def _empty(value) -> bool:
    return is_missing(value) or (isinstance(value, str) and not value.strip())


def _values(table: pd.DataFrame, column: str) -> list:
    return [None if _empty(v) else v for v in table[column].tolist()]


def says_nothing(table: pd.DataFrame, column: str) -> bool:
    """Whether a headline column tells this table's reader nothing: empty on every row, or a speed-up that
    is only its baselines' own 1.00×."""
    found = [v for v in _values(table, column) if v is not None]
    if column == "speedup":
        return all(abs(float(v) - 1.0) < 1e-9 for v in found)
    return not found


def shared_columns(table: pd.DataFrame, skip=(), shown=HEADLINE) -> dict[str, object]:
    """{column: its value} of the columns outside `shown` (and `skip`) that hold one value, the same, on every
    row (of two rows or more: one row's every value is "shared"). Empty on every row is not a shared value."""
    if len(table) < 2:
        return {}
    shared = {}
    for column in table.columns:
        if column in shown or column in NOT_SHARED or column in skip:
            continue
        values = _values(table, column)
        if values[0] is not None and all(_same(v, values[0]) for v in values):
            shared[column] = values[0]
    return shared


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def value_text(column: str, value) -> str:
    """A value as its table column shows it: its number format and scale, a tick as yes or no."""
    spec = COLUMNS.get(column)
    if spec is None:
        return str(value)
    if spec.kind == "checkbox":
        return "yes" if bool(value) else "no"
    if spec.kind == "number" and spec.format and "%" in spec.format:
        try:
            return spec.format % (float(value) * spec.scale)
        except (TypeError, ValueError):
            return str(value)
    if spec.kind == "datetime":
        return str(value)[:16]
    return str(value)


def _label(column: str) -> str:
    spec = COLUMNS.get(column)
    return spec.label if spec else column


def shared_note(shared: dict[str, object]) -> str:
    """shared_columns' values as one caption sentence, "" when there are none."""
    if not shared:
        return ""
    items = (f"{md_text(_label(c))} **{md_text(value_text(c, v))}**" for c, v in shared.items())
    return "The same on every row: " + " · ".join(items) + "."


def headline(part: pd.DataFrame, headed: bool = False) -> Headline:
    """A compare_table part (one workload section, flags as `flags`) as first shown: HEADLINE's columns that
    say something, and one caption line with the speed-up's baseline, the figures no row has, and the values
    every row shares; the baseline and model left to the section's head where it has one (`headed`)."""
    shown = [c for c in HEADLINE if c in part and (c == "label" or not says_nothing(part, c))]
    notes = []
    bases = list(dict.fromkeys(v for v in _values(part, "speedup_vs") if v is not None)) if "speedup_vs" in part else []
    if "speedup" in shown and len(bases) > 1:  # one baseline a section; several are named on each row
        shown.insert(shown.index("speedup") + 1, "speedup_vs")
    elif "speedup" in shown and bases and not headed:
        notes.append(f"Speed-up against {md_text(bases[0])}.")
    unknown = [_label(c) for c in FIGURES if c in part and c not in shown]
    if unknown:
        notes.append("No row has " + ", ".join(f"**{md_text(u)}**" for u in unknown) + ".")
    shared = shared_note(shared_columns(part, skip=("model",) if headed else ()))
    if shared:
        notes.append(shared)
    hints = {"usd_per_million_examples": cost_help(part["model"] if "model" in part else ())}
    # The row's name takes the room the figures leave: a published row's long name reads whole.
    others = [c for c in shown if c != "label"]
    widths = {"label": fitted_width("label", part["label"], others)} if "label" in part else {}
    return Headline(part[shown].reset_index(drop=True), " ".join(notes), hints, widths)


def headline_parts(parts: list[tuple[str, pd.DataFrame]]) -> list[tuple[str, Headline]]:
    """sections.table_parts' (head, part) pairs as first shown: a head names its section's workload and baseline."""
    return [(head, headline(part, headed=bool(head))) for head, part in parts]
