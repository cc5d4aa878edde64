"""The Predict page's chart: every device's predicted throughput per chip and cost per million, with
the leave-one-out band as error bars; measured runs overlaid with their own marker; the cheapest
device to the target marked. Predicted points are hollow diamonds labelled "predicted"."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashbench.predict.table import cheapest_to_target


def _bars(values, lows, highs) -> dict:
    plus = [None if h is None else h - v for v, h in zip(values, highs)]
    minus = [None if lo is None else v - lo for v, lo in zip(values, lows)]
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus}


def figure(rows: list[dict]) -> go.Figure:
    unit = rows[0]["unit"] if rows else "examples"
    names = [f"{r['device']} ×{r['chips']}" for r in rows]
    per_chip = [r["throughput_per_chip"] for r in rows]
    lows = [None if r["throughput_low"] is None else r["throughput_low"] / r["chips"] for r in rows]
    highs = [None if r["throughput_high"] is None else r["throughput_high"] / r["chips"] for r in rows]
    fig = make_subplots(rows=1, cols=2, subplot_titles=(f"{unit}/s per chip", f"USD per million {unit} (on demand)"))
    predicted = {"mode": "markers", "marker": {"symbol": "diamond-open", "size": 11}}
    fig.add_trace(
        go.Scatter(x=per_chip, y=names, name="predicted", error_x=_bars(per_chip, lows, highs), **predicted), 1, 1
    )
    cost = [r["usd_per_million"] for r in rows]
    cost_low = [r["usd_per_million_low"] for r in rows]
    cost_high = [r["usd_per_million_high"] for r in rows]
    fig.add_trace(
        go.Scatter(x=cost, y=names, name="predicted cost", error_x=_bars(cost, cost_low, cost_high), **predicted), 1, 2
    )
    seen = [r for r in rows if r["measured_throughput"]]
    if seen:
        fig.add_trace(
            go.Scatter(
                x=[r["measured_throughput"] / r["chips"] for r in seen],
                y=[f"{r['device']} ×{r['chips']}" for r in seen],
                name="measured (your runs)",
                mode="markers",
                marker={"symbol": "circle", "size": 10},
            ),
            1,
            1,
        )
    cheapest = cheapest_to_target(rows)
    if cheapest:
        row = next(r for r in rows if r["device"] == cheapest)
        fig.add_trace(
            go.Scatter(
                x=[row["usd_per_million"]],
                y=[f"{row['device']} ×{row['chips']}"],
                name="cheapest to the target",
                mode="markers+text",
                text=["cheapest to target"],
                textposition="middle right",
                marker={"symbol": "star", "size": 16},
            ),
            1,
            2,
        )
    fig.update_layout(height=max(320, 28 * len(rows) + 140), legend={"orientation": "h", "y": -0.1})
    fig.update_xaxes(type="log")
    return fig
