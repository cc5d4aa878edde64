"""What Compare chooses and says by default, under streamlit.testing.v1.AppTest of the real app on real
SQLite stores: the newest runs of what the user just did (a to-accuracy run is not the setup of a
throughput run), the runs of other models the Model filter hides, each speed-up's baseline named, a
to-accuracy section without empty charts, and ?runs= links with the short ids the CLI takes."""

import random

from fixtures import dashboard_data
from fixtures.accuracy_results import block, seed_run
from fixtures.app_test import every_compare_column, show, start, texts

from dashbench.core.spec import RunSpec
from dashbench.store import Store

QUICK = dict(model="fashion_mnist_cnn", batch_size=64, width=16, device="cpu", steps=6)  # its quick try


def throughput_run(store, backend="tensorflow", eps=400.0, **spec) -> str:
    """A finished throughput run, stored as the engine stores it (tests/fixtures/dashboard_data.py)."""
    spec = RunSpec(**{**QUICK, "backend": backend, **spec})
    return dashboard_data._finished(store, spec, "CPU", "cpu", 1, eps, [], random.Random(len(backend)))


def to_accuracy_run(store, reached: bool, backend="tensorflow") -> str:
    """A to-accuracy run of the quick try's model and batch on real data: `reached` or not_reached."""
    spec = RunSpec(**QUICK, backend=backend, data="real", data_path="/x", target_accuracy=0.9)
    run_id = store.create_run(spec, status="running")
    seeds = [seed_run(0, 2, 1.0, 0.5, reached=reached)]
    result = {
        "model": spec.model,
        "device": "cpu",
        "accelerator": "CPU",
        "accelerator_count": 1,
        "replicas": 1,
        "global_batch_size": 64,
        "precision": "float32",
        "data": "real",
        "examples_per_sec": 61.0,
        "losses": [2.0, 1.5],
        "steps_per_loop": 1,
        "spec": spec.to_dict(),
        "accuracy": block(seeds),
        **({"backend": backend} if backend != "tensorflow" else {}),
    }
    store.finish_run(run_id, "done" if reached else "not_reached", result=result)
    return run_id


def test_the_default_keeps_the_throughput_run_beside_a_to_accuracy_run_of_its_setup(tmp_path, monkeypatch):
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:  # what a new user does first: two quick tries, then a run to accuracy
        tf = throughput_run(store, "tensorflow", 400.0)
        jax = throughput_run(store, "jax", 520.0)
        target = to_accuracy_run(store, reached=False)
    at = show(start(monkeypatch, db), "pages/compare.py")
    assert sorted(at.multiselect(key="cmp_runs").value) == sorted([tf, jax, target])
    # And speed-ups are over a throughput run, not over the to-accuracy run's training steps.
    assert at.selectbox(key="cmp_baseline").value == tf


def test_runs_of_other_models_the_model_filter_hides_are_counted_and_named(tmp_path, monkeypatch):
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        throughput_run(store)
        throughput_run(store, batch_size=32)
        throughput_run(store, model="resnet50", batch_size=8, image_size=32, width=None)  # the newest
    at = show(start(monkeypatch, db), "pages/compare.py")
    assert at.multiselect(key="cmp_model").value == ["resnet50"]
    shown = texts(at).replace("\\_", "_")  # the markdown source: a model name's underscores are escaped
    assert "2 of the newest runs are of fashion_mnist_cnn, which the Model filter hides: add fashion_mnist_cnn" in shown
    at.multiselect(key="cmp_model").set_value(["resnet50", "fashion_mnist_cnn"]).run()
    assert len(at.multiselect(key="cmp_runs").value) == 3 and "the Model filter hides" not in texts(at)


def test_each_rows_speedup_names_its_own_baseline(tmp_path, monkeypatch):
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:  # a quick-shape run and the published full-size rows: two sections
        quick = throughput_run(store, model="resnet50", batch_size=8, image_size=32, width=None)
        full = throughput_run(store, model="resnet50", batch_size=8, eps=30.0, width=None)
    at = show(start(monkeypatch, db), "pages/compare.py")
    parts = [d.value for d in at.dataframe if "label" in d.value.columns]
    assert len(parts) == 2  # the numbers split as the charts are, one table per section
    assert texts(at).count(" · speed-up against ") == 2  # one baseline each, named above its table
    assert not any("speedup_vs" in part for part in parts)  # and not again on every row
    table = every_compare_column(at)  # where every row names its own
    assert table["speedup_vs"].dropna().nunique() == 2
    rows = {row["label"]: row for row in table.to_dict("records")}
    by_run = {row["run_id"]: row for row in rows.values() if row["kind"] == "measured"}
    assert by_run[quick]["speedup_vs"] == by_run[quick]["label"]  # each section's first run is its own baseline
    assert by_run[full]["speedup_vs"] == by_run[full]["label"]
    published = [row for row in rows.values() if row["kind"] == "reference" and row["speedup"] == row["speedup"]]
    assert published and all(row["speedup_vs"] == by_run[full]["label"] for row in published)  # full size's


def test_a_to_accuracy_run_that_missed_its_target_gets_one_line_not_empty_charts(tmp_path, monkeypatch):
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        missed = to_accuracy_run(store, reached=False)
    at = start(monkeypatch, db)
    at.query_params["runs"] = missed
    show(at, "pages/compare.py")
    titles = [str(c.proto.spec) for c in at.get("plotly_chart")]
    assert not any("Time to target" in t or "Cost to target" in t for t in titles)
    assert "No time or cost to target: no chosen run reached its target" in texts(at)
    assert any("Validation accuracy against wall time" in t for t in titles)  # how far it got still shows


def test_a_link_takes_short_ids_and_names_the_ids_it_did_not_find(tmp_path, monkeypatch):
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        first = throughput_run(store)
        second = throughput_run(store, batch_size=32)
    at = start(monkeypatch, db)
    at.query_params["runs"] = f"{first[-6:]},#{second[-6:]},nosuch1,{first[:8]}"  # the CLI takes each
    show(at, "pages/compare.py")
    assert at.multiselect(key="cmp_runs").value == [first, second]
    shown = texts(at)
    assert "Not found in this store: nosuch1." in shown
    assert f"the start or end of several run ids; give more characters: {first[:8]}" in shown
