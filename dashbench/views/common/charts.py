"""Plotly figure builders: a DataFrame in, a Figure out. No Streamlit and no TensorFlow here.

Frames come from the views (compare.numbers.compare_frame, common.samples.step_samples, compare.numbers.sweep_frame),
so the column names below are the ones those produce. Reference rows (published figures) are drawn hatched and
grey so they can never be mistaken for a measured run.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from dashbench.views.common.format import cost_unit

MEASURED_COLOR = "#1f77b4"
REFERENCE_COLOR = "#9e9e9e"
FLAGGED_COLOR = "#d62728"
SPOT_COLOR = "#ff7f0e"
# Plotly's toolbar (the modebar) takes a strip this high across the figure's top right, and shows on hover
# over whatever lies there: a half-width chart's title ran under it. Every title starts below the strip.
MODEBAR_PX = 40
# px above the plot: the modebar's strip, the title's line, then a line for each legend entry (a half-width
# chart's plot is too narrow for Plotly to set them side by side).
TITLE_PX, LEGEND_LINE_PX = MODEBAR_PX + 30, 20

# No template of our own: Streamlit's (its theme, light or dark) costs a figure nothing to build, where
# plotly_white's validation is paid by every chart.
LAYOUT = dict(margin=dict(l=10, r=10, t=TITLE_PX, b=10), height=380)


def title_of(text) -> dict:
    """A figure's title (text, or a title dict), pinned under the modebar's strip: every figure's title is
    made here, so none starts where the modebar is drawn."""
    title = dict(text) if isinstance(text, dict) else dict(text=text)
    return dict(title, y=1.0, yref="container", yanchor="top", pad=dict(t=MODEBAR_PX))


def empty_figure(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(title=title_of(title), xaxis_visible=False, yaxis_visible=False, **LAYOUT)
    return fig


def _wrap(label, width: int = 34) -> str:
    """Break a long run label onto lines at its separators: unbroken, long labels on a half-width
    chart's axis squeeze the bars away, and Plotly then cuts the labels' start off."""
    text = str(label)
    if len(text) <= width:
        return text
    pieces = text.replace(" (", " \0(").replace(" · ", " · \0").split("\0")
    lines, line = [], ""
    for piece in pieces:
        if line and len(line) + len(piece) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    lines.append(line.rstrip())
    return "<br>".join(lines)


def wrapped(labels) -> list[str]:
    return [_wrap(label) for label in labels]


def _is_reference(df: pd.DataFrame) -> pd.Series:
    if "kind" not in df:
        return pd.Series(False, index=df.index)
    return df["kind"].eq("reference")


def _flag_marks(df: pd.DataFrame) -> list[str]:
    if "flag_text" not in df:
        return [""] * len(df)
    return ["⚠ " + t if isinstance(t, str) and t else "" for t in df["flag_text"]]


def _bar_colors(df: pd.DataFrame) -> list[str]:
    ref = _is_reference(df)
    marks = _flag_marks(df)
    return [REFERENCE_COLOR if r else (FLAGGED_COLOR if m else MEASURED_COLOR) for r, m in zip(ref, marks)]


def _patterns(df: pd.DataFrame) -> list[str]:
    return ["/" if r else "" for r in _is_reference(df)]


# Short names: above a half-width chart the legend takes a line for each.
_COLOR_KEY = (("measured", MEASURED_COLOR), ("flagged", FLAGGED_COLOR), ("published", REFERENCE_COLOR))


def _color_key(colors: list[str]) -> list[dict]:
    """Legend entries for the bar colours in use: one bar trace colours every bar itself (a trace per colour
    would need its own place on each row), so the legend's entries are markers that draw nothing."""
    return [
        dict(
            type="scatter",
            x=[None],
            y=[None],
            mode="markers",
            name=name,
            hoverinfo="skip",
            marker=dict(color=color, symbol="square", size=12),
        )
        for name, color in _COLOR_KEY
        if color in colors
    ]


def legend_on_top(title, entries: int) -> dict:
    """Layout for a legend of `entries` between the title and the plot: beside the title it ran over it
    on a half-width chart (a 1400 px window), below it collides with the axis title and notes. The title
    is pinned under the modebar (title_of), the legend sits on the plot's top edge, and the top margin leaves
    a line for the title and one for each entry."""
    return dict(
        title=title_of(title),
        showlegend=True,
        legend=dict(orientation="h", x=0, xanchor="left", y=1.0, yanchor="bottom"),
        margin=dict(t=TITLE_PX + LEGEND_LINE_PX * entries + 10),
    )


def unvalidated_figure(traces: list[dict], layout: dict) -> go.Figure:
    """A figure made in one go from plain trace and layout dicts, unvalidated: Plotly's checks of each
    property are paid on every change of Compare's choice. The dicts are written in
    Plotly's full form (title=dict(text=...)); tests/views/test_views.py validates every chart built here."""
    return go.Figure(data=traces, layout=layout, _validate=False)


class SharedFigure(go.Figure):
    """A finished figure that many sessions draw (kept by ui.memo, never changed once drawn): its dict is
    made once. st.plotly_chart asks every figure for to_dict(), Plotly's deep copy of it and a walk over
    every value for arrays to encode, each time it is drawn: most of what a chart cost a new visitor's
    server. The same dict is handed to every caller, so no caller may change it."""

    _made: dict | None = None

    def to_dict(self):
        made = self._made
        if made is None:
            made = super().to_dict()
            for trace in made.get("data", []):
                trace.pop("uid", None)  # as plotly.io.to_json would, on a dict another session may be writing out
            self._made = made
        return made


def shared(figure: go.Figure | None) -> SharedFigure | None:
    """`figure` itself, made a SharedFigure (None stays None): for a figure kept and drawn as it is from now
    on. Its class is changed in place (SharedFigure adds no state of its own): Plotly's copy of a figure into
    a new one would be paid by the visitor who builds it."""
    if figure is not None and not isinstance(figure, SharedFigure):
        figure.__class__ = SharedFigure
    return figure


def _axis_title(text) -> dict:
    return text if isinstance(text, dict) else dict(text=text)


def hbar(traces: list[dict], title, n: int, axis_title: str, **layout) -> go.Figure:
    """Horizontal bars (or boxes): run labels are long, and read best on the y axis, first row on top."""
    # Room on the right for the value (and flag) printed past the end of each bar.
    base = dict(
        LAYOUT,
        height=max(260, 90 + 44 * n),
        margin=dict(l=10, r=150, t=TITLE_PX, b=10),
        title=title_of(title),
        xaxis=dict(title=_axis_title(axis_title)),
        yaxis=dict(autorange="reversed", automargin=True),
    )
    for key, value in layout.items():
        base[key] = dict(base[key], **value) if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    base["height"] += (
        base["margin"]["t"] - 50
    )  # the title's strip and a legend's line above the plot takes no room from the bars
    return unvalidated_figure(traces, base)


def throughput(df: pd.DataFrame, unit: str = "examples") -> go.Figure:
    """Examples per second per run, reference rows hatched grey, flagged runs red with the flag named."""
    title = f"Throughput ({unit}/s, higher is better)"
    rows = df[df["examples_per_sec"].notna()] if "examples_per_sec" in df else df.iloc[0:0]
    if rows.empty:
        return empty_figure(title, "No runs with a throughput figure")
    values = rows["examples_per_sec"].tolist()
    colors = _bar_colors(rows)
    bars = dict(
        type="bar",
        y=wrapped(rows["label"]),
        x=values,
        orientation="h",
        marker=dict(color=colors, pattern=dict(shape=_patterns(rows))),
        text=[number_text(v) + (f"  {m}" if m else "") for v, m in zip(values, _flag_marks(rows))],
        textposition="outside",
        cliponaxis=False,
        showlegend=False,
        hovertemplate="%{y}<br>%{x:,.1f} /s<extra></extra>",
    )
    key = _color_key(colors)
    layout = legend_on_top(title, len(key))
    return hbar([bars, *key], layout.pop("title"), len(rows), f"{unit}/s", **layout)


def cost_per_million(df: pd.DataFrame) -> go.Figure:
    """On-demand and spot USD per million of the runs' unit (examples, or an LM's tokens) side by side;
    unpriced runs are named, not dropped."""
    unit = cost_unit(df["model"] if "model" in df else ())
    title = f"Cost per million {unit} (USD, lower is better)"
    if df.empty or "usd_per_million_examples" not in df:
        return empty_figure(title, "No runs selected")
    priced = df[df["usd_per_million_examples"].notna()]
    unpriced = df[df["usd_per_million_examples"].isna() & ~_is_reference(df)]
    if priced.empty:
        return empty_figure(title, "No selected run has a price: set one on the Prices page")
    labels, patterns = wrapped(priced["label"]), _patterns(priced)
    traces = [
        dict(
            type="bar",
            y=labels,
            x=priced["usd_per_million_examples"].tolist(),
            name="on-demand",
            orientation="h",
            marker=dict(color=MEASURED_COLOR, pattern=dict(shape=patterns)),
            hovertemplate="%{y}<br>$%{x:,.3f}<extra>on-demand</extra>",
        )
    ]
    if "usd_per_million_examples_spot" in priced and priced["usd_per_million_examples_spot"].notna().any():
        traces.append(
            dict(
                type="bar",
                y=labels,
                x=_nulls(priced["usd_per_million_examples_spot"]),
                name="spot",
                orientation="h",
                marker=dict(color=SPOT_COLOR, pattern=dict(shape=patterns)),
                hovertemplate="%{y}<br>$%{x:,.3f}<extra>spot</extra>",
            )
        )
    notes = []
    if not unpriced.empty:
        # The runs are named in the caption above the charts; a long list here runs off the figure.
        notes.append(
            dict(
                text=f"no price: {len(unpriced)} run(s) not shown",
                showarrow=False,
                x=0,
                y=-0.02,
                xref="paper",
                yref="paper",
                xanchor="left",
                yanchor="top",
                yshift=-40,
                font=dict(color=FLAGGED_COLOR),
            )
        )
    layout = legend_on_top(title, len(traces))
    layout["margin"]["b"] = 60  # the no-price note under the axis title
    return hbar(
        traces,
        layout.pop("title"),
        2 * len(priced),
        "USD / 1M " + ("units" if " " in unit else unit),
        barmode="group",
        **({"annotations": notes} if notes else {}),
        **layout,
    )


def peak_memory(df: pd.DataFrame) -> go.Figure:
    """Each run's measured peak memory (GB), its pre-run estimate as a mark, and each device memory
    size among the runs (a GPU's, a TPU's, the host's) as a dashed line."""
    title = "Peak memory (GB; the line: the device's memory)"
    rows = df[df["peak_memory_bytes"].notna()] if "peak_memory_bytes" in df else df.iloc[0:0]
    if rows.empty:
        return empty_figure(title, "No run with a measured peak")
    labels = wrapped(rows["label"])
    peaks = [v / 1e9 for v in rows["peak_memory_bytes"]]
    traces = [
        dict(
            type="bar",
            y=labels,
            x=peaks,
            orientation="h",
            name="peak",
            marker=dict(color=MEASURED_COLOR),
            text=[f"{v:,.2f} GB" for v in peaks],
            textposition="outside",
            cliponaxis=False,
            hovertemplate="%{y}<br>peak %{x:,.2f} GB<extra></extra>",
        )
    ]
    if "memory_estimate_bytes" in rows and rows["memory_estimate_bytes"].notna().any():
        traces.append(
            dict(
                type="scatter",
                mode="markers",
                y=labels,
                x=_nulls(rows["memory_estimate_bytes"] / 1e9),
                name="estimate",
                marker=dict(symbol="diamond", size=10, color=SPOT_COLOR),
                hovertemplate="%{y}<br>estimate %{x:,.2f} GB<extra></extra>",
            )
        )
    capacities = sorted({float(v) for v in rows.get("memory_capacity_bytes", pd.Series(dtype=float)).dropna()})
    lines = [
        dict(
            type="line",
            xref="x",
            yref="paper",
            x0=c / 1e9,
            x1=c / 1e9,
            y0=0,
            y1=1,
            line=dict(color=FLAGGED_COLOR, dash="dash"),
        )
        for c in capacities
    ]
    notes = [
        dict(
            text=f"memory {c / 1e9:,.1f} GB",
            x=c / 1e9,
            y=1,
            xref="x",
            yref="paper",
            showarrow=False,
            xanchor="right",
            yanchor="bottom",
            font=dict(color=FLAGGED_COLOR),
        )
        for c in capacities
    ]
    layout = legend_on_top(title, len(traces))
    return hbar(traces, layout.pop("title"), len(rows), "GB", shapes=lines, annotations=notes, **layout)


def speedup(df: pd.DataFrame, baseline_label: str) -> go.Figure:
    """Speed-up of each row against the baseline (1.0 = same speed), computed from raw figures."""
    short = baseline_label if len(baseline_label) <= 48 else baseline_label[:47] + "…"
    title = f"Speed-up vs {short} (×)"
    rows = df[df["speedup"].notna()] if "speedup" in df else df.iloc[0:0]
    if rows.empty:
        return empty_figure(title, "Pick a baseline with a throughput figure")
    values, labels, colors = rows["speedup"].tolist(), wrapped(rows["label"]), _bar_colors(rows)
    bars = dict(
        type="bar",
        y=labels,
        x=values,
        orientation="h",
        showlegend=False,
        marker=dict(color=colors, pattern=dict(shape=_patterns(rows))),
        hovertemplate="%{y}<br>%{x:.2f}×<extra></extra>",
    )
    one = dict(type="line", x0=1.0, x1=1.0, xref="x", y0=0, y1=1, yref="y domain", line=dict(dash="dot", color="#555"))
    # The figures in a column right of the plot: printed at a bar's end, one a little under 1× sat on
    # the baseline's dotted line.
    figures = [
        dict(text=f"{v:.2f}×", x=1.0, xref="paper", xanchor="left", xshift=8, y=label, yref="y", showarrow=False)
        for v, label in zip(values, labels)
    ]
    key = _color_key(colors)
    layout = legend_on_top(title, len(key))
    return hbar([bars, *key], layout.pop("title"), len(rows), "× baseline", shapes=[one], annotations=figures, **layout)


def throughput_vs_batch(df: pd.DataFrame, walls: dict | None = None) -> go.Figure:
    """One line per series (a sweep, or model · device · precision) of throughput against batch size;
    `walls` (sweep id -> the smallest batch that ran out of memory) drawn as dashed lines, "OOM"."""
    title = "Throughput vs batch size"
    rows = df[df["examples_per_sec"].notna()] if "examples_per_sec" in df else df.iloc[0:0]
    if rows.empty or "series" not in rows:
        return empty_figure(title, "No sweep among the selected runs")
    lines: dict = {}  # series -> [(batch, examples/s)], series in the order they first appear
    for name, batch, eps in zip(rows["series"], rows["batch_size"], rows["examples_per_sec"]):
        lines.setdefault(name, []).append((batch, eps))
    traces = []
    for name, points in lines.items():
        points.sort(key=lambda p: math.inf if pd.isna(p[0]) else p[0])
        traces.append(
            dict(
                type="scatter",
                x=[_plain(p[0]) for p in points],
                y=[_plain(p[1]) for p in points],
                mode="lines+markers",
                name=str(name),
                hovertemplate="batch %{x}<br>%{y:,.1f} /s<extra>%{fullData.name}</extra>",
            )
        )
    # Log scale (sweeps double the batch), ticked at the batch sizes measured, not at 3, 4, 5, …
    shown = set(rows["sweep_id"].dropna()) if "sweep_id" in rows else set()
    wall_at = sorted({int(b) for sweep, b in (walls or {}).items() if sweep in shown})
    sizes = sorted({int(b) for b in rows["batch_size"].dropna()} | set(wall_at))
    lines_ = [
        dict(type="line", xref="x", yref="paper", x0=b, x1=b, y0=0, y1=1, line=dict(color=FLAGGED_COLOR, dash="dash"))
        for b in wall_at
    ]
    notes = [
        dict(
            text=f"OOM at {b}",
            x=math.log10(b),
            y=1,
            xref="x",
            yref="paper",
            showarrow=False,
            xanchor="right",
            yanchor="bottom",
            font=dict(color=FLAGGED_COLOR),
        )
        for b in wall_at
    ]
    return unvalidated_figure(
        traces,
        dict(
            LAYOUT,
            title=title_of(title),
            yaxis=dict(title=_axis_title("examples/s"), rangemode="tozero"),
            xaxis=dict(
                title=_axis_title("global batch size"), type="log", tickvals=sizes, ticktext=[str(b) for b in sizes]
            ),
            **({"shapes": lines_, "annotations": notes} if wall_at else {}),
        ),
    )


def _plain(value):
    """A number as Python has it (numpy's own scalars are what the validation used to convert)."""
    return value.item() if hasattr(value, "item") else value


def _nulls(values: pd.Series) -> list:
    """A column's numbers with its gaps as None: unvalidated, a NaN would reach Plotly as NaN."""
    return [None if pd.isna(v) else v for v in values.tolist()]


def number_text(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.3g}"
