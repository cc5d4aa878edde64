"""Compare and Results with a to-accuracy run in the store, under streamlit.testing.v1.AppTest: time and
cost to target per device (measured and predicted), accuracy against time and cost, the run's curve.
The results are shaped as the engine stores them (tests/views/test_to_target.py builds them); real training
lands on these pages in tests/engine/test_accuracy_real.py."""

from fixtures.accuracy_charts import charts
from fixtures.accuracy_results import block, seed_run, store_run
from fixtures.app_test import select_rows, show, start, texts

from dashbench.costs import prices
from dashbench.store import Store
from dashbench.views.compare import accuracy as accuracy_view


def test_compare_and_results_show_time_and_cost_to_target(tmp_path, monkeypatch):
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        x = store_run(store, "tensorflow", 640.0, block([seed_run(0, 2, 1.0, 0.5), seed_run(1, 3, 1.0, 0.5)]))
        y = store_run(store, "jax", 1280.0)
        store.set_price_override(prices.store_row(prices.override_row("CPU", "hour", 3.6, provider="test")))
    at = start(monkeypatch, db)
    at.query_params["runs"] = f"{x},{y}"
    show(at, "pages/compare.py")
    assert "Time and cost to target" in [s.value for s in at.subheader]
    shown = charts(at)
    bars = shown["Time to target (median of seeds; bars: min–max)"]["data"]
    assert [b["name"] for b in bars] == ["measured", "predicted from another device's epochs"]
    assert bars[0]["error_x"]["array"] and bars[1]["marker"]["pattern"]["shape"] == "/"
    cost = shown["Cost to target (on-demand USD; bars: min–max of seeds)"]["data"]
    assert cost[0]["x"][0] > 0 and cost[1]["x"][0] > 0  # the override's $3.6/h on both devices
    assert {"Validation accuracy against wall time", "Validation accuracy against cost (on-demand USD)"} <= set(shown)
    # First shown: what the table is read for, narrow; "how" (measured or predicted) under Every column.
    assert not [d for d in at.dataframe if "how" in d.value.columns]
    (first,) = [d.value for d in at.dataframe if "time to target (s, median)" in d.value.columns]
    assert list(first.columns) == list(accuracy_view.TARGET_HEADLINE)
    at.session_state["cmp_target_all"] = True
    at.run()
    (table,) = [d.value for d in at.dataframe if "how" in d.value.columns]
    assert table["how"].tolist() == ["measured", "predicted from the epochs measured on CPU · tensorflow"]
    assert "Predicted rows" in texts(at)

    show(at, "pages/results.py")
    select_rows(at, [x])
    assert "Validation accuracy and loss per evaluation" in charts(at)
