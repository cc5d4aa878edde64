"""Charts of a run's samples: the step-time spread of chosen runs, one run's loss and step times, and the
Run page's live chart. Built like charts.py's, from plain dicts without Plotly's validation."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashbench.views.common.charts import (
    LAYOUT,
    MEASURED_COLOR,
    REFERENCE_COLOR,
    empty_figure,
    hbar,
    number_text,
    title_of,
    wrapped,
)

# Warm-up loops grey and hollow, measured ones in the measured colour (red means "flagged" here).
_PHASES = ((True, "warm-up", "circle-open", REFERENCE_COLOR), (False, "measured", "circle", MEASURED_COLOR))


def step_time_distribution(samples: pd.DataFrame) -> go.Figure:
    """Box per run of the per-step time of its measured samples (warm-up excluded; a bucket's mean for a run
    of more loops than a chart draws, samples.step_samples)."""
    title = "Step time per run (ms, lower is better)"
    if samples.empty:
        return empty_figure(title, "No step-time samples recorded for these runs")
    # One trace, a box per run on the y axis: a trace per run costs its build for each run, for nothing.
    boxes = dict(
        type="box",
        x=(samples["step_time_s"] * 1000.0).tolist(),
        y=wrapped(samples["label"]),
        orientation="h",
        boxpoints="all",
        jitter=0.3,
        pointpos=0,
        marker=dict(color=MEASURED_COLOR),
        hovertemplate="%{y}<br>%{x:.2f} ms<extra></extra>",
    )
    ticks, span = _log_ticks(boxes["x"])
    return hbar(
        [boxes],
        title,
        samples["label"].nunique(),
        "ms per step",
        showlegend=False,
        xaxis=dict(type="log", tickvals=ticks, ticktext=[number_text(t) for t in ticks], range=span),
    )


def _log_ticks(values) -> tuple[list[float], list[float]]:
    """(tick values, log10 range) for a log axis: at 1, 10, 100 … where the values span decades (minor
    ticks read as noise), at 1, 2, 5 … within fewer, and never fewer than two: Plotly's decade ticks
    left one tick, or none, under runs that all took 3 to 8 ms."""
    positive = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not positive:
        return [], None
    lo, hi = min(positive), max(positive)
    powers = range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2)
    steps = [m * 10.0**e for e in powers for m in (1, 2, 5)]
    decades = [10.0**e for e in powers if lo <= 10.0**e <= hi]
    ticks = decades if len(decades) >= 2 else [t for t in steps if lo <= t <= hi]
    while len(ticks) < 2:  # add the 1-2-5 step nearest to the values outside them, below or above
        below = [t for t in steps if t < min(ticks, default=lo)]
        above = [t for t in steps if t > max(ticks, default=hi)]
        if below and (not above or lo / below[-1] < above[0] / hi):
            ticks.insert(0, below[-1])
        else:
            ticks.append(above[0])
    # A little room past the outer ticks and the outermost points, so neither sits on the frame.
    return ticks, [math.log10(min(lo, ticks[0])) - 0.08, math.log10(max(hi, ticks[-1])) + 0.08]


def loss_curve(samples: pd.DataFrame) -> go.Figure:
    """Loss per host loop; warm-up loops drawn as hollow markers so convergence is judged on both."""
    title = "Loss per loop"
    if samples.empty or samples["loss"].dropna().empty:
        return empty_figure(title, "No loss recorded")
    fig = go.Figure()
    for warm, name, symbol, color in _PHASES:
        part = samples[samples["warmup"].astype(bool) == warm]
        if not part.empty:
            fig.add_trace(
                go.Scatter(
                    x=part["index"],
                    y=part["loss"],
                    mode="lines+markers",
                    name=name,
                    marker_symbol=symbol,
                    line_color=color,
                )
            )
    fig.update_layout(title=title_of(title), xaxis_title="loop", yaxis_title="loss", **LAYOUT)
    return fig


def step_time_series(samples: pd.DataFrame) -> go.Figure:
    """Per-step time of each loop (bucket of loops, for a long run) in order: drift, outliers and a slow first
    loop show here."""
    title = "Step time per loop (ms)"
    if samples.empty:
        return empty_figure(title, "No samples recorded")
    fig = go.Figure()
    for warm, name, symbol, color in _PHASES:
        part = samples[samples["warmup"].astype(bool) == warm]
        if not part.empty:
            fig.add_trace(
                go.Scatter(
                    x=part["index"],
                    y=part["step_time_s"] * 1000.0,
                    mode="lines+markers",
                    name=name,
                    marker_symbol=symbol,
                    line_color=color,
                )
            )
    fig.update_layout(title=title_of(title), xaxis_title="loop", yaxis_title="ms per step", **LAYOUT)
    return fig


def live(samples: pd.DataFrame) -> go.Figure:
    """Step time and loss of a run in progress, stacked, sharing the loop axis."""
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=("step time (ms)", "loss")
    )
    if not samples.empty:
        fig.add_trace(
            go.Scatter(x=samples["index"], y=samples["step_time_s"] * 1000.0, mode="lines+markers", name="step time"),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(x=samples["index"], y=samples["loss"], mode="lines+markers", name="loss"), row=2, col=1
        )
    fig.update_layout(showlegend=False, height=420, margin=dict(l=10, r=10, t=30, b=10))
    fig.update_xaxes(title_text="loop", row=2, col=1)
    return fig
