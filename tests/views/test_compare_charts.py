"""Compare's charts read at a glance: a legend says what the bar colours mean, the
speed-up figures stay off the baseline's line, and the step-time axis always has ticks to read."""

import math

import pandas as pd
import pytest

from dashbench.views.common import charts, sample_charts

# One row of each kind: a measured run, a flagged one, a published figure.
ROWS = pd.DataFrame(
    {
        "label": ["CPU · b32 · fp32 (#aaaaaa)", "V100 · b32 · fp32 (#bbbbbb)", "published: Colab · K80"],
        "kind": ["measured", "measured", "reference"],
        "examples_per_sec": [400.0, 380.0, 450.0],
        "speedup": [1.0, 0.95, 1.125],  # a bar a little under 1×: its figure printed at its end sat on the line
        "flag_text": ["", "above peak", ""],
    }
)


def legend_entries(fig) -> dict[str, str]:
    return {t.name: t.marker.color for t in fig.data if t.showlegend is not False and t.name}


@pytest.mark.parametrize("build", [charts.throughput, lambda rows: charts.speedup(rows, "CPU · b32")])
def test_bar_colours_have_a_legend(build):
    fig = build(ROWS)
    (bars,) = [t for t in fig.data if t.type == "bar"]
    entries = legend_entries(fig)
    assert entries == {
        "measured": charts.MEASURED_COLOR,
        "flagged": charts.FLAGGED_COLOR,
        "published": charts.REFERENCE_COLOR,
    }
    assert set(bars.marker.color) == set(entries.values())  # each colour drawn is explained
    assert fig.layout.showlegend is True
    # Only the colours in use: without a flagged run there is no "flagged" entry.
    assert "flagged" not in legend_entries(build(ROWS.assign(flag_text=""))), "an entry for a colour not drawn"


def test_speedup_figures_sit_right_of_the_plot_not_on_the_baseline():
    fig = charts.speedup(ROWS, "CPU · b32")
    (baseline,) = fig.layout.shapes
    assert baseline.x0 == baseline.x1 == 1.0 and baseline.xref == "x"
    (bars,) = [t for t in fig.data if t.type == "bar"]
    assert not bars.text  # nothing printed at a bar's end, where a bar just under 1× put it on the line
    figures = [a for a in fig.layout.annotations if a.text.endswith("×")]
    assert [a.text for a in figures] == ["1.00×", "0.95×", "1.12×"]
    for note in figures:  # past the plot's right edge (paper x 1), in the right margin, never inside the plot
        assert note.xref == "paper" and note.x >= 1.0 and note.xanchor == "left" and note.xshift > 0
    assert fig.layout.margin.r >= 60  # room for them


def step_samples(ms_by_label: dict) -> pd.DataFrame:
    rows = [(label, ms / 1000.0) for label, values in ms_by_label.items() for ms in values]
    return pd.DataFrame(rows, columns=["label", "step_time_s"])


@pytest.mark.parametrize(
    "ms, at_least",
    [
        ({"a": [3.1, 3.4], "b": [7.6, 8.2]}, 2),  # inside one decade: Plotly's decade ticks showed none
        ({"a": [1.2, 1.3], "b": [1.25]}, 2),  # all within a few percent
        ({"a": [0.4, 0.5], "b": [12.0, 14.0]}, 2),  # one decade tick (1 ms) and a 1-2-5 one beside it
        ({"a": [117.0], "b": [12877.0]}, 2),  # decades: 1,000 and 10,000
    ],
)
def test_the_step_time_axis_has_at_least_two_ticks_inside_its_range(ms, at_least):
    axis = sample_charts.step_time_distribution(step_samples(ms)).layout.xaxis
    assert axis.type == "log"
    ticks = list(axis.tickvals)
    assert len(ticks) >= at_least and len(ticks) <= 8, ticks
    lo, hi = axis.range  # log10 of the ends
    assert all(lo <= math.log10(t) <= hi for t in ticks), (ticks, axis.range)
    values = [v for vs in ms.values() for v in vs]
    assert lo <= math.log10(min(values)) and math.log10(max(values)) <= hi  # every point inside the frame
    assert len(axis.ticktext) == len(ticks) and all(axis.ticktext)


def test_compare_offers_the_charts_its_runs_have_and_builds_only_those_asked_for():
    from dashbench.views.compare import sections as compare_view

    rows = ROWS.assign(
        id=["a", "b", "ref:c"],
        group="conv2d",
        model="conv2d",
        accelerator=["CPU", "CPU", "K80"],
        precision="fp32",
        batch_size=[32, 64, 32],
        usd_per_million_examples=[0.5, 0.6, 0.4],
    )
    # Two batch sizes of one CPU setup make a sweep; measured runs have step times; none measured its peak.
    assert compare_view.chart_kinds(rows) == ["sweep", "throughput", "cost", "speedup", "steps"]
    assert compare_view.chart_kinds(rows.assign(batch_size=32)) == ["throughput", "cost", "speedup", "steps"]
    # Throughput and cost only: the store (None here) is never read, the other figures never built.
    (section,) = compare_view.sections(rows, {"conv2d": "a"}, {"a": "CPU"}, None, ("throughput", "cost"))
    assert section.name == "conv2d" and section.throughput.data and section.cost.data
    assert section.speedup is None and section.steps is None and section.sweep is None and section.memory is None
