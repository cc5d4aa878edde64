"""Plotly figures of time and cost to a target accuracy (Compare) and of a run's curve (Results).
No Streamlit and no TensorFlow here; the rows come from compare.to_target.target_rows, the curves from
a stored RunResult.accuracy."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashbench.core.accuracy import METRICS, metric_of
from dashbench.views.common.charts import (
    LAYOUT,
    MEASURED_COLOR,
    REFERENCE_COLOR,
    TITLE_PX,
    empty_figure,
    legend_on_top,
    title_of,
    unvalidated_figure,
)
from dashbench.views.common.format import is_number

PREDICTED_COLOR = "#8fbbd9"  # the measured blue, lighter and hatched: a prediction is never read as measured
# One colour per run on the curve charts (seeds of one run share it, each its own dash).
RUN_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def _row_name(row: dict) -> str:
    target = f" to {row['target']:g}" if is_number(row.get("target")) else ""
    run = f"#{str(row.get('run_id', ''))[-6:]}"
    return f"{row['device']}{target} · " + (f"measured {run}" if row["kind"] == "measured" else f"predicted from {run}")


def to_target_bars(rows: list[dict], what: str = "time") -> go.Figure:
    """Median time (what="time", seconds) or cost (what="cost", USD on demand) to target per device and
    source, the seeds' min and max as error bars; predictions hatched and lighter, named as such."""
    column, low, high, title, axis = (
        ("time_to_target_s", "time_min_s", "time_max_s", "Time to target (median of seeds; bars: min–max)", "seconds")
        if what == "time"
        else ("usd_to_target", "usd_min", "usd_max", "Cost to target (on-demand USD; bars: min–max of seeds)", "USD")
    )
    shown = [r for r in rows if is_number(r.get(column))]
    if not shown:
        return empty_figure(title, "No time to target" if what == "time" else "No priced time to target (set a price)")
    traces = []
    for kind, color, pattern, name in (
        ("measured", MEASURED_COLOR, "", "measured"),
        ("predicted", PREDICTED_COLOR, "/", "predicted from another device's epochs"),
    ):
        part = [r for r in shown if r["kind"] == kind]
        if not part:
            continue
        values = [r[column] for r in part]
        traces.append(
            dict(
                type="bar",
                orientation="h",
                name=name,
                y=[_row_name(r) for r in part],
                x=values,
                marker=dict(color=color, pattern=dict(shape=pattern)),
                error_x=dict(
                    type="data",
                    symmetric=False,
                    array=[(r.get(high) or v) - v for r, v in zip(part, values)],
                    arrayminus=[v - (r.get(low) or v) for r, v in zip(part, values)],
                    color=REFERENCE_COLOR,
                ),
                # Inside, from the bar's start: outside, the value ran into the error bar's whisker.
                text=[_text(v, what) + _error_text(r) for r, v in zip(part, values)],
                textposition="inside",
                insidetextanchor="start",
                textfont=dict(color="#111111"),
                constraintext="none",
                hovertext=[r.get("source", "") for r in part],
            )
        )
    # A device's measured and predicted bars side by side, devices in the order they first appear.
    first = {}
    for r in shown:
        first.setdefault(r["device"], len(first))
    order = [_row_name(r) for r in sorted(shown, key=lambda r: (first[r["device"]], r["kind"] != "measured"))]
    layout = dict(
        LAYOUT,
        height=max(260, 110 + 44 * len(shown)),
        margin=dict(l=10, r=20, t=TITLE_PX, b=10),
        xaxis=dict(title=dict(text=axis)),
        yaxis=dict(autorange="reversed", automargin=True, categoryorder="array", categoryarray=order),
        barmode="overlay",
    )
    layout.update(legend_on_top(title, len(traces)))
    return unvalidated_figure(traces, layout)


def _text(value: float, what: str) -> str:
    return f"{value:.3g} s" if what == "time" else f"${value:.3g}"


def _error_text(row: dict) -> str:
    return f" (error {row['error']:+.0%})" if is_number(row.get("error")) else ""


def accuracy_against(curves: list[dict], x: str = "wall_s") -> go.Figure:
    """Validation accuracy per evaluation against wall time (x="wall_s", from each seed's first training
    step) or against its cost (x="usd", wall time at the run's device price). `curves`: dicts with
    name, seed, target, usd_per_hour and points (the stored curve)."""
    metrics = {c.get("metric") or "val_accuracy" for c in curves}
    # Accuracies and losses never share an axis: with both chosen, the loss targets' curves are drawn.
    metric = "val_loss" if "val_loss" in metrics else "val_accuracy"
    what = METRICS[metric]
    title = what.capitalize() + (" against wall time" if x == "wall_s" else " against cost (on-demand USD)")
    traces, target = [], None
    names = list(dict.fromkeys(c["name"] for c in curves))
    for curve in curves:
        rate = curve.get("usd_per_hour")
        if (x == "usd" and not is_number(rate)) or (curve.get("metric") or "val_accuracy") != metric:
            continue
        points = [p for p in curve["points"] if is_number(p.get("wall_s")) and is_number(p.get(metric))]
        if not points:
            continue
        xs = [p["wall_s"] if x == "wall_s" else p["wall_s"] * rate / 3600.0 for p in points]
        i = names.index(curve["name"])
        traces.append(
            dict(
                type="scatter",
                mode="lines+markers",
                x=xs,
                y=[p[metric] for p in points],
                name=f"{curve['name']} · seed {curve['seed']}",
                line=dict(color=RUN_COLORS[i % len(RUN_COLORS)], dash=DASHES[curve["seed"] % len(DASHES)]),
            )
        )
        target = curve.get("target") if is_number(curve.get("target")) else target
    if not traces:
        return empty_figure(
            title, "No priced to-accuracy run chosen (set a price)" if x == "usd" else "No to-accuracy run chosen"
        )
    layout = dict(
        LAYOUT, xaxis=dict(title=dict(text="seconds" if x == "wall_s" else "USD")), yaxis=dict(title=dict(text=what))
    )
    if target is not None:
        layout["shapes"] = [
            dict(
                type="line",
                xref="paper",
                x0=0,
                x1=1,
                y0=target,
                y1=target,
                line=dict(color=REFERENCE_COLOR, dash="dash"),
            )
        ]
    layout.update(title=title_of(title), showlegend=True)
    return unvalidated_figure(traces, layout)


def run_curve(block: dict) -> go.Figure:
    """A to-accuracy run's curve per seed: validation accuracy (top) and train and validation loss
    (bottom) per evaluation, against the epoch; the target as a dashed line."""
    title = "Validation accuracy and loss per evaluation"
    runs = (block or {}).get("runs") or []
    if not any(r.get("curve") for r in runs):
        return empty_figure(title, "No evaluation recorded")
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=("validation accuracy", "loss")
    )
    for i, run in enumerate(runs):
        curve = run.get("curve") or []
        color = RUN_COLORS[i % len(RUN_COLORS)]
        epochs = [p.get("epoch") for p in curve]
        seed = f"seed {run.get('seed')}"
        fig.add_trace(
            go.Scatter(
                x=epochs,
                y=[p.get("val_accuracy") for p in curve],
                mode="lines+markers",
                name=f"{seed} validation accuracy",
                line_color=color,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=epochs,
                y=[p.get("val_loss") for p in curve],
                mode="lines+markers",
                name=f"{seed} validation loss",
                line=dict(color=color),
            ),
            row=2,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=epochs,
                y=[p.get("train_loss") for p in curve],
                mode="lines",
                name=f"{seed} train loss",
                line=dict(color=color, dash="dot"),
            ),
            row=2,
            col=1,
        )
    if is_number(block.get("target")):  # a loss target on the loss panel
        row = 2 if metric_of(block) == "val_loss" else 1
        fig.add_hline(y=block["target"], line_dash="dash", line_color=REFERENCE_COLOR, row=row, col=1)
    fig.update_layout(title=title_of(title), **dict(LAYOUT, height=520))
    fig.update_xaxes(title_text="epoch", row=2, col=1)
    return fig
