"""A cost per million follows the run's unit: an LM's throughput counts tokens, so its "$ / 1M" is per
million tokens, and the Results and Compare pages say so (stored runs, the real app under AppTest)."""

from __future__ import annotations

import json

import pytest
from fixtures import dashboard_data
from fixtures.app_test import assert_clean, show, start

from dashbench.costs import prices, run_cost


@pytest.fixture
def two_units(tmp_path):
    db = tmp_path / "units.sqlite"
    return db, dashboard_data.fill_two_units(db)


def column_help(frame_element, column: str):
    config = json.loads(frame_element.proto.columns)
    return config[column].get("help")


def test_results_says_per_million_of_the_runs_unit(two_units, monkeypatch):
    db, ids = two_units
    at = show(start(monkeypatch, db), "pages/results.py")
    (table,) = [d for d in at.dataframe if (d.key or "").startswith("res_table_")]
    rows = table.value.set_index("run_id")
    # The figure is per the run's own unit: examples_per_sec is tokens/s for the LM.
    price = run_cost.matcher(prices.catalog())("TPU v2", 4, None)["usd_per_hour"]
    for model, eps in (("llama", 52_000.0), ("fashion_mnist_cnn", 26_000.0)):
        assert rows.loc[ids[model], "usd_per_million_examples"] == pytest.approx(price / (eps * 3600) * 1e6)
    mixed = "on-demand USD per million of the run's unit (examples or tokens)"
    assert column_help(table, "usd_per_million_examples") == mixed
    assert any(mixed in c.value for c in at.caption)
    for model, word in (("llama", "tokens"), ("fashion_mnist_cnn", "examples")):
        at.multiselect(key="res_model").set_value([model]).run()
        assert_clean(at)
        (table,) = [d for d in at.dataframe if (d.key or "").startswith("res_table_")]
        assert list(table.value["run_id"]) == [ids[model]]
        assert column_help(table, "usd_per_million_examples") == f"on-demand USD per million {word}"
        assert any(f"cost is on-demand USD per million {word} (blank" in c.value for c in at.caption)


def test_compare_cost_chart_and_table_follow_each_sections_unit(two_units, monkeypatch):
    db, ids = two_units
    at = show(start(monkeypatch, db), "pages/compare.py")
    # The first look offers one workload's runs: both asked for, as a visitor's filter and picks do.
    at.multiselect(key="cmp_model").set_value(sorted(ids)).run()
    at.multiselect(key="cmp_runs").set_value(list(ids.values())).run()
    assert_clean(at)
    assert sorted(at.multiselect(key="cmp_runs").value) == sorted(ids.values())
    titles = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        bars = " ".join(str(y) for trace in spec["data"] for y in trace.get("y") or [])
        title = spec["layout"]["title"]["text"]
        for model, run_id in ids.items():
            if run_id[-6:] in bars.replace("<br>", ""):
                titles.setdefault(model, []).append((title, spec["layout"]["xaxis"]["title"]["text"]))
    assert ("Cost per million tokens (USD, lower is better)", "USD / 1M tokens") in titles["llama"]
    assert ("Throughput (tokens/s, higher is better)", "tokens/s") in titles["llama"]
    assert ("Cost per million examples (USD, lower is better)", "USD / 1M examples") in titles["fashion_mnist_cnn"]
    assert ("Throughput (examples/s, higher is better)", "examples/s") in titles["fashion_mnist_cnn"]
    hints = {}
    for frame in at.dataframe:  # each section's headline table: its rows' labels end with their run ids
        if "usd_per_million_examples" in frame.value and "label" in frame.value:
            labels = " ".join(str(label) for label in frame.value["label"])
            for model, run_id in ids.items():
                if run_id[-6:] in labels:
                    hints[model] = column_help(frame, "usd_per_million_examples")
    assert hints["llama"] == "on-demand USD per million tokens"
    assert hints["fashion_mnist_cnn"] == "on-demand USD per million examples"
