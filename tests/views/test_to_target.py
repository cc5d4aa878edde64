"""Time and cost to target, and its prediction on other devices (views.to_target), on results shaped as
the engine stores them (dashbench.core.accuracy.summarize) in a real SQLite store. Real training checks the
prediction in tests/engine/test_accuracy_real.py."""

import pytest
from fixtures.accuracy_results import block, seed_run, store_run

from dashbench.core.spec import RunSpec
from dashbench.costs import prices
from dashbench.store import Store
from dashbench.views.compare import accuracy as accuracy_view
from dashbench.views.compare import to_target


def test_prediction_is_epochs_times_examples_over_throughput_plus_scaled_evaluation(tmp_path):
    # On device X (TensorFlow, 640 examples/s): 2 and 3 epochs of 640 examples (1 s each), 0.5 s an evaluation.
    source = block([seed_run(0, 2, 1.0, 0.5), seed_run(1, 3, 1.0, 0.5)])
    with Store(tmp_path / "runs.sqlite") as store:
        x = store_run(store, "tensorflow", 640.0, source)
        store_run(store, "jax", 1280.0)  # device Y: a throughput run only, twice as fast
        chosen, found, throughput = to_target.gather(store, [x])
    rows = to_target.target_rows(chosen, found, throughput, lambda row: 3.6)
    measured = [r for r in rows if r["kind"] == "measured"]
    (predicted,) = [r for r in rows if r["kind"] == "predicted"]
    assert measured[0]["time_to_target_s"] == pytest.approx(3.75)  # median of 3.0 and 4.5
    assert measured[0]["usd_to_target"] == pytest.approx(3.75 * 3.6 / 3600)
    assert predicted["device"] == "CPU · jax"
    assert predicted["source"] == "predicted from the epochs measured on CPU · tensorflow"
    # seed 0: 2 epochs × 640 / 1280 + 2 of 4 evaluations (1 s) × 640/1280 = 1.5; seed 1: 1.5 + 0.75 = 2.25
    assert (predicted["time_min_s"], predicted["time_max_s"]) == pytest.approx((1.5, 2.25))
    assert predicted["time_to_target_s"] == pytest.approx(1.875) and predicted["error"] is None


def test_prediction_error_against_a_measured_run_on_that_device(tmp_path):
    with Store(tmp_path / "runs.sqlite") as store:
        x = store_run(store, "tensorflow", 640.0, block([seed_run(0, 2, 1.0, 0.5)]))
        y = store_run(store, "jax", 1280.0, block([seed_run(0, 2, 0.6, 0.25)]))  # measured there: 1.7 s
        chosen, found, throughput = to_target.gather(store, [x])
    rows = to_target.target_rows(chosen, found, throughput, lambda row: None)
    (predicted,) = [r for r in rows if r["kind"] == "predicted"]
    assert predicted["time_to_target_s"] == pytest.approx(1.5)  # 2 × 640/1280 + 2 × 0.5 s of evaluation × 0.5
    assert predicted["error"] == pytest.approx((1.5 - 1.7) / 1.7) and predicted["measured_run_id"] == y
    assert {r["run_id"] for r in rows if r["kind"] == "measured"} == {x, y}
    assert predicted["usd_to_target"] is None  # no price: no cost, the time still shown


def test_a_different_target_or_setup_is_not_compared(tmp_path):
    with Store(tmp_path / "runs.sqlite") as store:
        x = store_run(store, "tensorflow", 640.0, block([seed_run(0, 2, 1.0, 0.5)]))
        store_run(store, "jax", 1280.0, block([seed_run(0, 2, 0.5, 0.25)], target=0.8))
        spec = RunSpec(model="fashion_mnist_cnn", batch_size=32, image_size=28, width=16, device="cpu", replicas=2)
        other = store.create_run(spec, status="running")  # another global batch: not this setup's throughput
        store.finish_run(
            other,
            "done",
            result={
                "model": "fashion_mnist_cnn",
                "accelerator": "CPU",
                "accelerator_count": 1,
                "replicas": 2,
                "global_batch_size": 32,
                "examples_per_sec": 9000.0,
                "spec": spec.to_dict(),
            },
        )
        chosen, found, throughput = to_target.gather(store, [x])
    rows = to_target.target_rows(chosen, found, throughput, lambda row: None)
    (predicted,) = [r for r in rows if r["kind"] == "predicted"]
    assert predicted["device"] == "CPU · jax" and predicted["error"] is None  # its measured run aimed at 0.8


def test_compare_section_and_table(tmp_path):
    with Store(tmp_path / "runs.sqlite") as store:
        x = store_run(store, "tensorflow", 640.0, block([seed_run(0, 2, 1.0, 0.5), seed_run(1, 9, 1.0, 0.5)]))
        store_run(store, "jax", 1280.0)
        section = accuracy_view.target_section(store, [x], None)
    table = section.table
    assert table["seeds reached"].tolist() == ["1/2", "1/2"]
    assert table["how"].tolist() == ["measured", "predicted from the epochs measured on CPU · tensorflow"]
    time_bars = section.time.to_dict()["data"]
    assert [t["name"] for t in time_bars] == ["measured", "predicted from another device's epochs"]
    # Unpriced: one line for the cost charts, not two empty ones.
    assert section.cost is None and section.against_cost is None and "No cost to target" in section.note
    assert len(section.against_time.to_dict()["data"]) == 2  # a line per seed
    # First shown: the columns the table is read for (unpriced: no cost), narrow; the rest under Every column.
    shown = section.shown
    assert list(shown.table.columns) == ["device", "run", "epochs to target (median)", "time to target (s, median)"]
    assert len(shown.table) == 2 and "how" in table.columns
    # Both rows aim at one target with 1 of 2 seeds reaching it: said once, not a column each.
    assert "The same on every row" in shown.caption and "seeds reached **1/2**" in shown.caption
    assert "how" not in shown.caption  # measured and predicted differ


def test_the_unvalidated_charts_pass_plotlys_validation(tmp_path):
    """accuracy_charts builds its bars and curves unvalidated (charts.unvalidated_figure), as Compare's other charts."""
    import json

    import plotly.graph_objects as go
    import plotly.io as pio

    with Store(tmp_path / "runs.sqlite") as store:
        x = store_run(store, "tensorflow", 640.0, block([seed_run(0, 2, 1.0, 0.5), seed_run(1, 3, 1.0, 0.5)]))
        store_run(store, "jax", 1280.0, block([seed_run(0, 2, 0.6, 0.25)]))
        store.set_price_override(prices.store_row(prices.override_row("CPU", "hour", 3.6, provider="test")))
        section = accuracy_view.target_section(store, [x], prices.catalog(store))
    assert section.cost.to_dict()["data"][0]["x"][0] > 0  # priced: bars, not the empty chart
    for fig in (section.time, section.cost, section.against_time, section.against_cost):
        validated = go.Figure(fig.to_dict())  # raises on an unknown property or a bad value
        assert json.loads(pio.to_json(validated)) == json.loads(pio.to_json(fig))
