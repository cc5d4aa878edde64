"""How the dashboard's tables show their columns: a readable label, a number format and a hint.

Plain data, no Streamlit: `dashbench.ui.column_config` turns these into `st.column_config` objects.
The tables keep machine-readable column names (the CSV download uses them as its header).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    label: str
    kind: str = "text"  # text | number | datetime | checkbox
    format: str | None = None  # a Streamlit number/datetime format: printf-style or a preset name
    help: str | None = None
    pinned: bool = False
    width: int | None = None  # px; None: width_of's default for the kind, at least the label's width
    scale: float = 1.0  # shown times this (a fraction as a percentage); the data and its CSV keep the fraction


# A table draws every column at a width set here (never sized to its content): at a 1400 px window the
# figures a row is read for come first and fit beside the run's name, and no figure is cut short.
# Estimated from the grid's 14 px font: ~7.5 px a character and ~20 px of padding and sort mark.
CHAR_PX, PAD_PX = 7.5, 20
KIND_WIDTH = {"text": 120, "number": 90, "datetime": 140, "checkbox": 60}
# The room a table has beside the sidebar at a 1400 px window, and what a cell's text takes a character
# there (the grid's 14 px proportional font, estimated high: a name estimated too wide is still whole).
ROOM_PX = 938
CELL_CHAR_PX, CELL_PAD_PX = 6.2, 24
# What a row must show without scrolling sideways, in each dashboard table's first columns.
MUST_SEE = ("examples_per_sec", "mfu", "usd_per_million_examples", "flags")


MS = "%.2f ms"
USD = "$%.3f"

COLUMNS: dict[str, Column] = {
    "run": Column("run", pinned=True, help="#id · model · device · batch · precision (label)", width=330),
    "label": Column("run / published row", pinned=True, width=330),
    "name": Column("published row", pinned=True, width=330),
    "kind": Column("kind", help="measured here, or a published figure"),
    "examples_per_sec": Column("examples/s", "number", "%.1f", "throughput, warm-up and compile excluded"),
    "speedup": Column("speed-up ×", "number", "%.2f×", "examples/s against the chosen baseline"),
    "speedup_vs": Column(
        "speed-up against",
        help="the row whose examples/s this speed-up is over: the baseline of its workload and shape",
        width=330,
    ),
    "step_time_median_ms": Column("step median", "number", MS, width=110),  # a CPU's "12877.61 ms"
    "step_time_p10_ms": Column("step p10", "number", MS, width=110),
    "step_time_p90_ms": Column("step p90", "number", MS, width=110),
    # One decimal, as the CLI's MFU line: Streamlit's "percent" showed 7.1% beside 18.79%.
    "mfu": Column("MFU", "number", "%.1f%%", "achieved FLOP/s over the device's peak", width=80, scale=100),
    "achieved_tflops": Column("TFLOP/s", "number", "%.3g"),
    "peak_tflops": Column("MFU's peak", "number", "%.3g", "the peak TFLOP/s this row's MFU divides by", width=100),
    "usd_per_million_examples": Column("$ / 1M", "number", USD, "on-demand USD per million examples", width=90),
    "usd_per_million_examples_spot": Column("$ / 1M (spot)", "number", USD),
    "examples_per_usd": Column("examples / $", "number", "%.0f"),
    "examples_per_usd_spot": Column("examples / $ (spot)", "number", "%.0f"),
    "flags": Column("flags", help="above peak, did not converge, not on the chosen device, NaN loss", width=190),
    "status": Column("status", width=90),
    "model": Column("model"),
    "backend": Column("backend", help="Keras backend that ran it: tensorflow or jax"),
    "backend_version": Column("backend version", help="that framework's version (TensorFlow or JAX)"),
    "accelerator": Column("device"),
    "accelerator_count": Column("chips", "number", "%d"),
    "batch_size": Column("batch", "number", "%d", "global batch size"),
    "precision": Column("precision"),
    "xla": Column("XLA", "checkbox"),
    "samples": Column("samples", "number", "%d", "measured host loops"),
    "compile_s": Column("compile", "number", "%.2f s", "compile and first step, not in the throughput"),
    "created_at": Column("created", "datetime", "YYYY-MM-DD HH:mm", width=150),
    "run_label": Column("label"),
    "sweep_id": Column("sweep"),
    "host": Column("host"),
    "error": Column("error", width=300),
    "run_id": Column("run id", width=260),
    "price_key": Column("price row"),
    "price_note": Column("price note"),
    "source": Column("source", width=300),
    # To accuracy (accuracy_text.ACCURACY_COLUMNS)
    "target_accuracy": Column("target", "number", "%.3g", "the validation accuracy the run trained to"),
    "target_loss": Column("target loss", "number", "%.3g", "the validation loss the run trained down to"),
    "steps_to_target": Column("steps to target", "number", "%d", "median over the seeds that reached it"),
    "final_val_loss": Column("val loss", "number", "%.4g", "last validation loss (median over seeds)"),
    "reached": Column("seeds reached", "number", "%d", "seeds that reached the target"),
    "seeds": Column("seeds", "number", "%d"),
    "time_to_target_s": Column(
        "time to target",
        "number",
        "%.2f s",
        "median over the seeds that reached it; evaluations in, compile and loading out",
    ),
    "time_to_target_min_s": Column("fastest seed", "number", "%.2f s"),
    "time_to_target_max_s": Column("slowest seed", "number", "%.2f s"),
    "epochs_to_target": Column("epochs to target", "number", "%.3g", "median over the seeds that reached it"),
    "final_val_accuracy": Column("val accuracy", "number", "%.3g", "last validation accuracy (median over seeds)"),
    "epochs_trained": Column("epochs", "number", "%.3g"),
    "eval_share": Column(
        "evaluation share", "number", "%.1f%%", "share of the timed region spent evaluating", scale=100
    ),
    "load_s": Column("data loading", "number", "%.2f s", "outside the timed region"),
    # Prices page
    "origin": Column("origin", help="shipped with dashbench, or your override"),
    "device": Column("device"),
    "provider": Column("provider"),
    "unit": Column("billed per"),
    "chips_per_unit": Column("chips / unit", "number", "%d"),
    "on_demand_usd_per_hour": Column("on-demand $/h", "number", "$%.3f"),
    "spot_usd_per_hour": Column("spot $/h", "number", "$%.3f"),
    "region": Column("region"),
    "unconfirmed": Column("unconfirmed", "checkbox"),
    "as_of": Column("as of"),
    "note": Column("note", width=300),
    "key": Column("key"),
    # Published rows
    "figure_text": Column("published figure", width=260),
    "workload": Column("workload"),
    "ratio_claimed": Column("ratio claimed", "number", "%.2f×"),
    "ratio_computed": Column("ratio from raw figures", "number", "%.2f×"),
    "claim_differs": Column("claim differs", "checkbox"),
    "baseline": Column("baseline"),
    # Epochs table
    "time": Column("time"),
    "usd_on_demand": Column("cost on-demand", "number", "$%.2f", width=130),
    "usd_spot": Column("cost spot", "number", "$%.2f", width=110),
    "price": Column("price row"),
}


def as_shown(frame):
    """The frame as a table shows it: each scaled column (a fraction as a percentage) multiplied."""
    if not hasattr(frame, "assign"):
        return frame
    # Only numbers: a column of text under a known name (a figure already written as "41%") is shown as it is.
    scaled = {
        name: frame[name] * COLUMNS[name].scale
        for name in frame.columns
        if name in COLUMNS and COLUMNS[name].scale != 1.0 and not written(frame[name])
    }
    return frame.assign(**scaled) if scaled else frame


def written(column) -> bool:
    """Whether a column holds text (a figure already written, as "41%"), not numbers."""
    import pandas as pd

    if pd.api.types.is_numeric_dtype(column):
        return False
    return any(isinstance(v, str) for v in column.dropna())


def text_px(text: str) -> int:
    """About how wide `text` is drawn in a table cell, padding included."""
    return round(CHAR_PX * len(text) + PAD_PX)


def cells_px(texts) -> int:
    """About how wide a column must be to show the longest of `texts` whole in its cells."""
    return round(CELL_CHAR_PX * max((len(str(t)) for t in texts), default=0) + CELL_PAD_PX)


def fitted_width(name: str, texts, others: list[str]) -> int:
    """Column `name`'s width in a table that also shows the columns `others`: wide enough for its longest
    text, never narrower than width_of's, and never so wide that the table outgrows ROOM_PX."""
    room = ROOM_PX - sum(width_of(o) or 0 for o in others)
    return max(width_of(name), min(cells_px(texts), room))


def width_of(name: str) -> int | None:
    """The px width a table gives column `name` (None for a column without a spec here)."""
    spec = COLUMNS.get(name)
    if spec is None:
        return None
    return spec.width or max(KIND_WIDTH[spec.kind], text_px(spec.label))
