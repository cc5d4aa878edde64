"""A run's measured peak memory is carried by `list` (a column), `list --json`, `show`, Compare (a chart
per run with the device's memory as a line, and the CSV), bundles and Results' run detail."""

import json
import random
from pathlib import Path

import pandas as pd
from fixtures import dashboard_data
from streamlit.testing.v1 import AppTest

from dashbench.cli import main
from dashbench.core.spec import RunSpec
from dashbench.store import Store
from dashbench.views.common import stored_runs
from dashbench.views.compare import numbers as compare
from dashbench.views.compare import sections as compare_view

GB = 10**9


def memory_record(peak, capacity, estimate):
    return {
        "kind": "device",
        "source": "tf.config.experimental.get_memory_info",
        "peak_bytes": peak,
        "window_peak_bytes": peak - 10**8,
        "capacity_bytes": capacity,
        "devices": [
            {"name": "/device:GPU:0", "peak_bytes": peak, "window_peak_bytes": peak - 10**8, "capacity_bytes": capacity}
        ],
        "host_peak_bytes": 2 * GB,
        "estimate_bytes": estimate,
        "estimate_ratio": peak / estimate,
    }


def filled(tmp_path):
    db = tmp_path / "runs.sqlite"
    rng = random.Random(3)
    ids = []
    with Store(db) as store:
        for batch, peak in ((64, 5 * GB), (128, 9 * GB)):
            spec = RunSpec(model="fashion_mnist_cnn", batch_size=batch, device="gpu", steps=6, warmup=1)
            result, samples = dashboard_data.fake_result(spec, "V100", "gpu", 1, 9100.0, [], rng)
            result["memory"] = memory_record(peak, 16 * GB, 12 * GB)
            run_id = store.create_run(spec, status="running", pid=1, host="h")
            store.add_samples(run_id, samples)
            store.finish_run(run_id, "done", result=result)
            ids.append(run_id)
        plain = RunSpec(model="fashion_mnist_cnn", batch_size=32, device="gpu", steps=6, warmup=1)
        result, _ = dashboard_data.fake_result(plain, "V100", "gpu", 1, 9100.0, [], rng)  # stored before item 1
        old = store.create_run(plain, status="running", pid=1, host="h")
        store.finish_run(old, "done", result=result)
    return db, ids, old


def test_list_show_and_bundles_carry_the_peak(tmp_path, capsys):
    db, ids, old = filled(tmp_path)
    assert main(["list", "--db", str(db), "--json"]) == 0
    rows = {row["run_id"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows[ids[1]]["peak_memory_bytes"] == 9 * GB and rows[ids[1]]["memory_capacity_bytes"] == 16 * GB
    assert rows[ids[1]]["memory_estimate_ratio"] == 0.75
    assert rows[old]["peak_memory_bytes"] is None
    assert main(["list", "--db", str(db)]) == 0
    table = capsys.readouterr().out
    assert "peak mem" in table.splitlines()[0] and "9.00 GB" in table and "5.00 GB" in table
    assert main(["show", ids[1], "--db", str(db)]) == 0
    assert (
        "peak memory: 9.00 GB — device peak; measured window 8.90 GB; 0.75× the estimate 12.00 GB; of "
        "16.00 GB" in capsys.readouterr().out
    )
    bundle = tmp_path / "b.json"
    assert main(["export", "--db", str(db), "--out", str(bundle)]) == 0
    other = tmp_path / "other.sqlite"
    assert main(["import", str(bundle), "--db", str(other)]) == 0
    with Store(other) as store:
        assert store.get_run(ids[1])["result"].memory == memory_record(9 * GB, 16 * GB, 12 * GB)


def test_compare_csv_and_results_detail_carry_the_peak(tmp_path):
    db, ids, old = filled(tmp_path)
    with Store(db, read_only=True) as store:
        frame = compare_view.with_memory(compare.compare_frame(store.runs()), store)
        run = store.get_run(ids[0])
    table = compare.compare_table(frame)
    csv = pd.read_csv(__import__("io").BytesIO(compare.csv_bytes(table)))
    by_id = csv.set_index("run_id")
    assert by_id.loc[ids[0], "peak_memory_bytes"] == 5 * GB and pd.isna(by_id.loc[old, "peak_memory_bytes"])
    assert by_id.loc[ids[0], "memory_estimate_ratio"] == 5 / 12
    labels = [label for label, _value, _detail in stored_runs.run_detail(run)["headline"]]
    assert "peak memory" in labels


def test_compare_draws_the_memory_chart_with_the_device_memory_as_a_line(tmp_path, monkeypatch):
    db, ids, old = filled(tmp_path)
    monkeypatch.setenv("DASHBENCH_DB", str(db))
    monkeypatch.delenv("DASHBENCH_READ_ONLY", raising=False)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/compare.py").run()
    assert not at.exception, [e.value for e in at.exception]
    at.multiselect(key="cmp_runs").set_value([*ids, old]).run()
    assert not at.exception, [e.value for e in at.exception]
    (charts,) = at.get("segmented_control")  # drawn once picked: offered since runs measured their peak
    assert compare_view.CHARTS["memory"] in charts.options
    charts.set_value(["memory"]).run()
    assert not at.exception, [e.value for e in at.exception]
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    (chart,) = [s for s in specs if "Peak memory" in s["layout"]["title"]["text"]]
    bars = chart["data"][0]
    assert sorted(bars["x"]) == [5.0, 9.0]  # the run stored before peaks were measured has no bar
    (line,) = chart["layout"]["shapes"]
    assert line["x0"] == line["x1"] == 16.0 and line["line"]["dash"] == "dash"
    assert any("estimate" == trace.get("name") for trace in chart["data"])


def test_the_memory_chart_is_what_plotlys_validation_makes_of_it(tmp_path):
    import plotly.graph_objects as go
    import plotly.io as pio

    from dashbench.views.common import charts

    db, _ids, _old = filled(tmp_path)
    with Store(db, read_only=True) as store:
        frame = compare_view.with_memory(compare.compare_frame(store.runs()), store)
    for fig in (charts.peak_memory(frame), charts.peak_memory(frame.iloc[0:0])):
        validated = go.Figure(fig.to_dict())  # raises on an unknown property or a bad value
        assert json.loads(pio.to_json(validated)) == json.loads(pio.to_json(fig))


def test_bench_memory_estimate_reads_the_measured_peak_of_stored_runs(tmp_path, capsys):
    from fixtures import bench_scripts

    db, _ids, _old = filled(tmp_path)
    script = bench_scripts.load("memory_estimate")
    assert script.main(["--from-store", str(db), "--no-write"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| fashion_mnist_cnn")]
    assert len(rows) == 2  # the run stored before peaks were measured has none
    assert "| 128 | 12.00 | 9.00 | 8.90 | 16.00 | 1.33 |" in out and "| 64 | 12.00 | 5.00 |" in out


def test_a_sweeps_oom_wall_is_marked_on_throughput_vs_batch(tmp_path):
    import plotly.graph_objects as go
    import plotly.io as pio

    db = tmp_path / "sweep.sqlite"
    rng = random.Random(5)
    with Store(db) as store:
        for batch, status in ((8, "done"), (16, "done"), (32, "oom")):
            spec = RunSpec(model="conv2d", batch_size=batch, device="cpu", steps=4, warmup=1)
            run_id = store.create_run(spec, status="queued", sweep_id="sweep-x1", host="h")
            store.start_run(run_id, 1, "h")
            if status == "done":
                result, _ = dashboard_data.fake_result(
                    spec.replace(model="fashion_mnist_cnn"), "CPU", "cpu", 1, 400.0 * batch, [], rng
                )
                result.update(model="conv2d", spec=spec.to_dict())
                store.finish_run(run_id, "done", result=result)
            else:
                store.finish_run(run_id, "oom", error="out of memory before it started: batch_size: …")
        frame = compare.compare_frame(store.runs(status="done"))
        frame, bases = compare_view.with_speedups(frame, None)
        (section,) = compare_view.sections(frame, bases, compare.baseline_choices(frame), store)
    chart = json.loads(pio.to_json(section.sweep))
    (wall,) = chart["layout"]["shapes"]
    assert wall["x0"] == 32 and chart["layout"]["annotations"][0]["text"] == "OOM at 32"
    assert 32 in chart["layout"]["xaxis"]["tickvals"]
    assert json.loads(pio.to_json(go.Figure(section.sweep.to_dict()))) == chart  # what validation makes of it


def test_the_live_panel_says_an_oom_run_ran_out_of_memory():
    from dashbench.views.run import live

    view = live.live_view({"status": "oom", "error": "out of memory (MemoryError)"})
    assert view.finished and view.text == "oom: out of memory" and view.error == "out of memory (MemoryError)"
