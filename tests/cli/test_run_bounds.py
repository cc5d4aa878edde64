"""What one run may carry (samples, error text), and charts that read a bounded number of rows of any run."""

import copy
import sqlite3

import pytest
from fixtures import dashboard_data
from fixtures.app_test import APP, TIMEOUT_S, assert_clean, select_rows, show
from fixtures.import_checks import exported, snapshot, write  # noqa: F401 (a fixture)
from streamlit.testing.v1 import AppTest

from dashbench.core.spec import MAX_SAMPLES, RunSpec, SpecError
from dashbench.engine import measured
from dashbench.store import BundleError, Store, bundle
from dashbench.store.queries import CHART_BUCKETS
from dashbench.store.validate import MAX_ERROR_CHARS
from dashbench.views.common.samples import step_samples
from dashbench.views.compare.sections import CHARTS

BIG = 200_000  # loops of a run stored before the bound (the had 1.5 million)
WARM = 3


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    """A filled store whose newest done CPU run holds BIG samples, the first WARM of them warm-up."""
    db = tmp_path_factory.mktemp("big") / "runs.sqlite"
    ids = dashboard_data.fill(db, n_runs=6)
    with Store(db) as store:
        runs = store.runs(status="done")
    big = runs["run_id"].iloc[0]
    with sqlite3.connect(db) as conn:  # straight in: the Store would refuse a spec with this many loops
        conn.execute("DELETE FROM samples WHERE run_id = ?", (big,))
        conn.executemany(
            "INSERT INTO samples (run_id, idx, steps, duration_s, loss, warmup) VALUES (?,?,?,?,?,?)",
            ((big, i, 2, 0.02 * (5 if i == WARM else 1), 2.0 / (1 + i), int(i < WARM)) for i in range(BIG)),
        )
    return db, big, ids


def test_a_long_runs_chart_samples_are_at_most_the_bucket_count_with_its_first_and_last_loop(big_store):
    db, big, _ = big_store
    with Store(db, read_only=True) as store:
        rows = store.sample_buckets([big], measured_only=True)
        both = store.sample_buckets(big)
    assert len(rows) <= CHART_BUCKETS and not rows["warmup"].any()
    assert rows["index"].iloc[0] == WARM and rows["index"].iloc[-1] == BIG - 1  # first and last measured loop
    first = rows.iloc[0]
    assert first["loops"] == 1 and first["duration_s"] / first["steps"] == pytest.approx(0.05)  # the slow first loop
    # Sums are the run's: the steps done and the mean step time come out as from every row.
    assert rows["loops"].sum() == BIG - WARM and rows["steps"].sum() == 2 * (BIG - WARM)
    assert rows["duration_s"].sum() == pytest.approx(0.02 * (BIG - WARM) + 0.08)
    warm = both[both["warmup"]]
    assert warm["index"].tolist() == list(range(WARM))  # a few warm-up loops stay loop by loop
    assert len(both) - len(warm) <= CHART_BUCKETS


def test_a_short_runs_chart_samples_are_its_samples(tmp_path):
    with Store(tmp_path / "runs.sqlite") as store:
        run_id = store.create_run(RunSpec(model="fashion_mnist_cnn", batch_size=8, steps=CHART_BUCKETS))
        store.add_samples(
            run_id,
            [
                {"index": i, "steps": 1, "duration_s": 0.01 + i / 1e4, "loss": 1.0 / (1 + i), "warmup": i < 2}
                for i in range(CHART_BUCKETS + 2)
            ],
        )
        every, charted = store.samples(run_id), store.sample_buckets(run_id)
    assert (charted["loops"] == 1).all()
    assert charted.drop(columns="loops").equals(every)


def test_compare_of_a_long_run_charts_bucketed_samples_and_renders(big_store, monkeypatch):
    db, big, _ = big_store
    with Store(db, read_only=True) as store:
        frame = store.runs(run_ids=[big]).assign(kind="measured", label="big")
        assert len(step_samples(store, frame)) <= CHART_BUCKETS
    monkeypatch.setenv("DASHBENCH_DB", str(db))
    monkeypatch.setenv("DASHBENCH_READ_ONLY", "1")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.query_params["runs"] = big
    at.run()
    assert_clean(at)
    assert [t.value for t in at.title] == ["Compare"] and at.multiselect(key="cmp_runs").value == [big]
    (charts,) = at.get("segmented_control")  # throughput and cost until every chart is picked
    charts.set_value([kind for kind, label in CHARTS.items() if label in charts.options]).run()
    assert_clean(at)
    specs = [c.proto.spec for c in at.get("plotly_chart")]
    assert len(specs) >= 4 and all(len(spec) < 500_000 for spec in specs)  # step times bucketed, not every sample
    assert any("Step time per run" in spec for spec in specs)


def test_results_detail_of_a_long_run_renders_its_charts(big_store, monkeypatch):
    db, big, _ = big_store
    monkeypatch.setenv("DASHBENCH_DB", str(db))
    monkeypatch.setenv("DASHBENCH_READ_ONLY", "1")
    at = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    at.run()
    select_rows(show(at, "pages/results.py"), [big])
    charts = [c.proto.spec for c in at.get("plotly_chart")]
    assert len(charts) >= 2 and all(len(spec) < 500_000 for spec in charts)  # not 200,000 points each


def test_a_spec_of_more_host_loops_than_a_run_records_is_refused_naming_a_steps_per_loop_that_fits():
    with pytest.raises(SpecError) as caught:
        RunSpec(model="fashion_mnist_cnn", batch_size=8, steps=1_500_000, warmup=2)
    message = str(caught.value)
    assert caught.value.field == "steps" and "1500002 host loops" in message and str(MAX_SAMPLES) in message
    assert message.endswith("use steps_per_loop 16")
    RunSpec(model="fashion_mnist_cnn", batch_size=8, steps=1_500_000, warmup=2, steps_per_loop=16)
    with pytest.raises(SpecError, match="repeats"):
        RunSpec(model="fashion_mnist_cnn", batch_size=8, steps=200, repeats=1000)


def test_the_engine_records_at_most_max_samples_loops():
    spec = RunSpec(model="fashion_mnist_cnn", batch_size=8, steps=MAX_SAMPLES - 2, warmup=2)
    emitted = []
    _, samples, _ = measured.run_loops(lambda: (0.001, 1.0), spec, emitted.append)
    assert len(samples) == MAX_SAMPLES == sum(e["event"] == "sample" for e in emitted)
    with pytest.raises(SpecError):
        spec.replace(warmup=3)


def test_a_long_error_is_stored_cut_with_a_marker_and_its_export_imports_again(tmp_path):
    error = "ResourceExhaustedError: OOM " + "x" * 1_000_000 + " the end"
    with Store(tmp_path / "a.sqlite") as store:
        run_id = store.create_run(RunSpec(model="fashion_mnist_cnn", batch_size=8), status="running")
        store.finish_run(run_id, "failed", error=error)
        stored = store.get_run(run_id)["error"]
        bundle.export_bundle(store, tmp_path / "out.json")
    assert len(stored) <= MAX_ERROR_CHARS and stored.startswith("ResourceExhaustedError: OOM xxx")
    assert stored.endswith(f"[error cut: {len(error)} characters, only the first part kept]")
    with Store(tmp_path / "b.sqlite") as other:
        assert bundle.import_bundles(other, [tmp_path / "out.json"])["runs_added"] == 1
        assert other.get_run(run_id)["error"] == stored


@pytest.mark.parametrize(
    "field, change",
    [
        (
            "samples",
            lambda run: run.__setitem__("samples", [[i, 1, 0.01, None, False] for i in range(MAX_SAMPLES + 1)]),
        ),
        ("error", lambda run: run.__setitem__("error", "x" * (MAX_ERROR_CHARS + 1))),
        ("result.losses", lambda run: run["result"].__setitem__("losses", [1.0] * (MAX_SAMPLES + 1))),
    ],
)
def test_import_refuses_a_run_past_the_bounds(tmp_path, exported, field, change):  # noqa: F811
    data, db = exported
    bad = copy.deepcopy(data)
    change(bad["runs"][0])
    before = snapshot(db)
    with Store(db) as store:
        with pytest.raises(BundleError) as caught:
            bundle.import_bundles(store, [write(tmp_path, bad)])
    assert f"{field}:" in str(caught.value) and "\n" not in str(caught.value)
    assert snapshot(db) == before
