"""The dashboard's logic without Streamlit: views (tables, speed-up, filters, CSV, live view) and charts."""

import io
import os
import re

import pandas as pd
import pytest
from fixtures import dashboard_data

from dashbench.core.spec import RunSpec, SpecError
from dashbench.costs import prices, reference, run_cost
from dashbench.store import STATUSES, TERMINAL, Store
from dashbench.views.common import charts, context, devices, sample_charts, stored_runs
from dashbench.views.common.format import flag_list, flag_text, md_text, run_label
from dashbench.views.common.samples import prepare_samples, step_samples
from dashbench.views.compare import numbers as compare
from dashbench.views.compare import picker
from dashbench.views.results import runs as results
from dashbench.views.run import form as run_form
from dashbench.views.run import live

# The one sweep-id format, made by the CLI's sweep and the Run page alike (store.new_sweep_id).
SWEEP_ID = r"sweep-\d{8}-\d{6}-[0-9a-f]{8}"


@pytest.fixture
def store(tmp_path):
    path = tmp_path / "runs.sqlite"
    dashboard_data.fill(path, n_runs=24)
    with Store(path) as s:
        yield s


def test_flags_are_named_in_words():
    assert flag_text(["above_peak", "loss_not_falling"]) == "above peak; did not converge"
    assert "invalid" in flag_text(["above_peak"], short=False)
    assert flag_list(None) == [] and flag_list('["placement_mismatch"]') == ["placement_mismatch"]


def test_run_label_is_unique_and_says_what_ran(store):
    runs = store.runs()
    labels = [run_label(r) for _, r in runs.iterrows()]
    assert len(set(labels)) == len(labels)
    tpu = runs[runs["accelerator"] == "TPU v2"].iloc[0]
    assert "4×TPU v2" in run_label(tpu) and tpu["run_id"][-6:] in run_label(tpu)


def test_filters_and_search(store):
    only = store.runs(**stored_runs.query({"accelerator": ["V100"], "model": []}))
    assert len(only) and set(only["accelerator"]) == {"V100"}
    assert len(store.runs(**stored_runs.query({}, "  "))) == store.count_runs()
    found = store.runs(**stored_runs.query({}, "CPU SWEEP"))  # the label, any case
    assert set(found["sweep_id"]) == {"sweep-fixture-1"}
    assert store.count_runs(search="100%") == 0  # LIKE's wildcards typed are literal
    assert "TPU v2" in store.facets()["accelerator"]


def test_compare_frame_prices_runs_and_keeps_reference_rows_apart(store):
    runs = store.runs(status="done")
    frame = compare.compare_frame(runs, prices.catalog(store), reference.rows())
    measured = frame[frame["kind"] == "measured"]
    published = frame[frame["kind"] == "reference"]
    assert len(measured) == len(runs) and len(published) == len(reference.rows())
    assert published["label"].str.startswith("published: ").all()
    assert not measured["label"].str.startswith("published").any()
    # A V100 run is priced from the catalog; a CPU run whose host recorded no CPU count (the fixture's) has no price.
    v100 = measured[measured["accelerator"] == "V100"].iloc[0]
    price = run_cost.match_price("V100", 1, prices.catalog(store))
    expected = price["usd_per_hour"] / (v100["examples_per_sec"] * 3600) * 1e6
    assert v100["usd_per_million_examples"] == pytest.approx(expected)
    cpu = measured[measured["accelerator"] == "CPU"].iloc[0]
    assert pd.isna(cpu["usd_per_million_examples"]) and cpu["price_note"] == "no price"
    flagged = measured[measured["flags"].map(lambda f: "above_peak" in f)]
    assert len(flagged) and flagged["flag_text"].str.contains("above peak").all()


def test_speedup_against_a_run_and_against_a_published_row(store):
    runs = store.runs(status="done", model="bilstm")
    frame = compare.compare_frame(runs, None, reference.rows())
    base = frame[frame["kind"] == "measured"].iloc[0]
    out = compare.speedup_vs(frame, base["id"])
    assert out.loc[out["id"] == base["id"], "speedup"].iloc[0] == pytest.approx(1.0)
    other = out[(out["kind"] == "measured") & (out["id"] != base["id"])].iloc[0]
    assert other["speedup"] == pytest.approx(other["examples_per_sec"] / base["examples_per_sec"])
    # The BiLSTM's published raw figures: TPU / P100 is 12.9x, not the claimed 16.9x.
    out = compare.speedup_vs(frame, "ref:riseml-bilstm-p100")
    tpu = out[out["id"] == "ref:riseml-bilstm-tpu"].iloc[0]
    assert tpu["speedup"] == pytest.approx(21402 / 1658)
    # Other workloads get no ratio at all: a conv2d row is not "faster" than a BiLSTM.
    conv = out[out["model"] == "conv2d"]
    assert conv["speedup"].isna().all()


def test_csv_download_has_one_row_per_compared_item(store):
    frame = compare.compare_frame(store.runs(status="done"), prices.catalog(store), None)
    frame = compare.speedup_vs(frame, frame["id"].iloc[0])
    table = compare.compare_table(frame)
    back = pd.read_csv(io.BytesIO(compare.csv_bytes(table)))
    assert len(back) == len(frame)
    assert {"label", "examples_per_sec", "speedup", "usd_per_million_examples", "flags"} <= set(back.columns)
    assert back["flags"].fillna("").str.contains("above peak").any()


def test_sweep_frame_finds_the_stored_sweep(store):
    frame = compare.compare_frame(store.runs(status="done"), None, None)
    sweeps = compare.sweep_frame(frame)
    stored = sweeps[sweeps["sweep_id"] == "sweep-fixture-1"]
    assert sorted(stored["batch_size"]) == [32, 64, 128, 256]
    fig = charts.throughput_vs_batch(sweeps)
    assert any(list(t.x) == [32, 64, 128, 256] for t in fig.data)


def test_two_sweeps_of_one_day_are_two_lines():
    # Sweep ids as the Run page makes them: same date and minute, told apart only by their random tail.
    rows = pd.DataFrame(
        {
            "kind": "measured",
            "model": "conv2d",
            "accelerator": "CPU",
            "precision": "float32",
            "xla": False,
            "batch_size": [8, 16, 8, 16],
            "examples_per_sec": [1.0, 2.0, 3.0, 4.0],
            "sweep_id": ["sweep-20261130-0158-aaaaaa"] * 2 + ["sweep-20261130-0158-bbbbbb"] * 2,
        }
    )
    sweeps = compare.sweep_frame(rows)
    assert sweeps["series"].nunique() == 2
    assert len(charts.throughput_vs_batch(sweeps).data) == 2


def test_import_summary_reads_as_a_sentence():
    text = results.import_summary({"files": 1, "runs_added": 1, "runs_skipped": 7, "samples_added": 32})
    assert text == "Imported 1 run with 32 samples from 1 file; 7 runs already stored, kept once."
    assert "_" not in results.import_summary({"files": 2, "runs_added": 0, "runs_skipped": 0, "samples_added": 0})


# Stored text a bundle from elsewhere may carry, each with markdown (or HTML, or a Streamlit
# directive) that would do something on the page if shown unescaped.
HOSTILE = [
    "![x](http://host/p.png)",
    "[click](http://host/)",
    "<img src=http://host/p.png>",
    "<b>bold</b>",
    ":material/warning:",
    ":red[alarm]",
    ":smile:",
    "`code`",
    "**strong** *em* _em_ ~~gone~~",
    "# heading",
    "- item",
    "1. item",
    "> quote",
    "$x^2$",
    "a | b\n---|---",
    "http://host/p.png",
    "www.host.com",
    "&lt;b&gt; &#58;",
    "[ref]: http://host/p.png",
    "back\\slash \\*",
]
# Every mark CommonMark, GFM, math and Streamlit's directives give a meaning.
SPECIAL = "\\`*_{}[]()<>#+-.!|~=:$&^\"'@"


def _unescaped(markdown: str) -> str:
    """What the markdown shows as text: backslash escapes and invisible breaks undone."""
    return re.sub(r"\\(.)", r"\1", markdown.replace("\u200b", ""), flags=re.S)


@pytest.mark.parametrize("text", HOSTILE)
def test_md_text_shows_stored_markup_as_text(text):
    shown = md_text(text)
    lines = text.splitlines()
    assert _unescaped(shown).split("  \n") == [line.strip() for line in lines]
    # Once every escaped pair is taken out, no mark with a meaning is left bare ...
    bare = re.sub(r"\\.", "", shown, flags=re.S)
    assert not [c for c in bare if c in SPECIAL], shown
    # ... and no colon starts an icon or a directive, which Streamlit finds after escapes are gone.
    assert shown.count(":") == shown.count(":\u200b"), shown
    assert ":material/" not in shown.replace("\\", "")


def test_md_text_of_an_image_link_and_of_nothing():
    assert md_text("![x](http://host/p.png)") == "\\!\\[x\\]\\(http\\:\u200b//host/p\\.png\\)"
    assert md_text(None) == "" and md_text(float("nan")) == "" and md_text("plain words") == "plain words"
    assert md_text("  first\n      second") == "first  \nsecond"  # no code block from indentation


def test_delete_refuses_queued_and_running_runs(tmp_path):
    path = tmp_path / "runs.sqlite"
    ids = dashboard_data.fill(path, n_runs=6)
    with Store(path) as store:
        running = store.create_run(RunSpec(model="conv2d", batch_size=8), pid=os.getpid())  # alive
        queued = store.create_run(RunSpec(model="conv2d", batch_size=8), status="queued")
        message, ok = results.delete_runs(store, [ids[0], running, queued])
        assert not ok and message.startswith("Nothing deleted: ")
        assert f"{md_text(running)} (running)" in message and f"{md_text(queued)} (queued)" in message
        assert md_text(ids[0]) not in message
        assert "Cancel them on the Run page first" in message
        assert store.count_runs() == len(ids) + 2 and store.get_run(ids[0]) is not None
        message, ok = results.delete_runs(store, [running])
        assert not ok and "is not finished" in message and "Cancel it" in message
        assert results.delete_runs(store, ids[:2]) == ("Deleted 2 runs.", True)
        assert store.get_run(ids[0]) is None and store.get_run(running)["status"] == "running"
        store.finish_run(running, "cancelled")
        store.request_cancel(queued)


def test_run_form_to_specs_and_sweeps():
    state = run_form.run_form_defaults(["cpu"]) | {"run_image_size": 8, "run_label": "  ", "run_sweep": "16, 8 8"}
    (spec,), sweep = run_form.specs_from_form(state)
    assert spec.image_size == 8 and spec.seq_len is None and spec.label is None and sweep is None
    specs, sweep = run_form.specs_from_form(state, sweep=True)
    assert [s.batch_size for s in specs] == [16, 8] and re.fullmatch(SWEEP_ID, sweep)
    with pytest.raises(SpecError, match="batch_sizes"):
        run_form.specs_from_form(state | {"run_sweep": "32, lots"}, sweep=True)
    with pytest.raises(SpecError, match="model"):
        run_form.specs_from_form(state | {"run_model": "alexnet"})


def test_preset_fills_the_form_for_the_device_class():
    values = run_form.preset_form_values("riseml-resnet50", "tpu")
    assert values["run_model"] == "resnet50" and values["run_batch_size"] == 1024
    assert run_form.preset_form_values("riseml-resnet50", "gpu")["run_batch_size"] == 128
    quick = run_form.preset_form_values("colab-fashion-mnist", "cpu", quick=True)
    assert quick["run_steps"] <= 5 and quick["run_label"] == "preset:colab-fashion-mnist"
    assert "riseml-bilstm-tpu" in picker.preset_reference_keys(["preset:riseml-bilstm", None, "x"])


def test_live_view_is_a_plain_function_of_progress():
    queued = live.live_view({"status": "queued", "fraction": 0.0, "queue_position": 2, "samples": pd.DataFrame()})
    assert "(1 run ahead)" in queued.text and not queued.finished
    samples = [
        {"index": 0, "steps": 2, "duration_s": 1.0, "loss": 2.0, "warmup": True},
        {"index": 1, "steps": 2, "duration_s": 0.2, "loss": 1.5, "warmup": False},
    ]
    running = live.live_view(
        {
            "status": "running",
            "phase": "measure",
            "fraction": 0.5,
            "steps_done": 4,
            "steps_total": 8,
            "samples": pd.DataFrame(samples),
            "examples_per_sec_live": 80.0,
        }
    )
    assert running.fraction == 0.5 and "step 4 of 8" in running.text and "100.0 ms" in running.text
    assert running.text.startswith("running (measuring)")
    assert list(running.samples["step_time_s"]) == [0.5, 0.1]
    assert len(sample_charts.live(running.samples).data) == 2
    done = live.live_view({"status": "done", "fraction": 0.9, "samples": pd.DataFrame(samples)})
    assert done.finished and done.fraction == 1.0
    # Finished means what the store calls terminal: every one of them, and nothing else.
    assert [s for s in STATUSES if live.live_view({"status": s}).finished] == list(TERMINAL)


def test_live_view_from_a_real_run_row(tmp_path):
    from dashbench.core.spec import RunSpec
    from dashbench.jobs import queue

    db = tmp_path / "live.sqlite"
    with Store(db) as s:
        run_id = s.create_run(RunSpec(model="fashion_mnist_cnn", batch_size=8, steps=4, warmup=1))
        s.add_samples(
            run_id,
            [{"index": i, "steps": 1, "duration_s": 0.1, "loss": 1.0 - i / 10, "warmup": i == 0} for i in range(3)],
        )
    view = live.live_view(queue.progress(run_id, db))
    assert view.status == "running" and view.fraction == pytest.approx(3 / 5) and len(view.samples) == 3


def test_device_report_becomes_choices():
    cpu_only = devices.parse_devices(
        {"gpus": [], "tpu": {"evidence": None}, "cpu": {"model": "Xeon"}, "default_device": "cpu"}
    )
    assert cpu_only.kinds == ["cpu"] and "Xeon" in cpu_only.description["cpu"]
    gpu = devices.parse_devices(
        {"gpus": [{"accelerator": "V100"}, {"accelerator": "V100"}], "tpu": {}, "cpu": {}, "default_device": "gpu"}
    )
    assert gpu.kinds == ["gpu", "cpu"] and gpu.description["gpu"] == "GPU: 2× V100"
    tpu = devices.parse_devices(
        {"gpus": [], "tpu": {"evidence": "libtpu", "accelerator_type": "v5litepod-8"}, "default_device": "tpu"}
    )
    assert tpu.kinds[0] == "tpu"


def test_charts_mark_reference_rows_flags_and_unpriced_runs(store):
    frame = compare.compare_frame(store.runs(status="done"), prices.catalog(store), reference.rows())
    fig = charts.throughput(frame)
    bar = fig.data[0]
    assert "/" in bar.marker.pattern.shape  # reference rows hatched
    assert any("above peak" in t for t in bar.text)
    cost = charts.cost_per_million(frame)
    assert any("no price" in a.text for a in cost.layout.annotations)
    assert {t.name for t in cost.data} == {"on-demand", "spot"}
    empty = charts.throughput(frame.iloc[0:0])
    assert "No runs" in empty.layout.annotations[0].text


def test_step_samples_and_detail_charts(store):
    frame = compare.compare_frame(store.runs(status="done", limit=3), None, None)
    samples = step_samples(store, frame)
    assert set(samples["label"]) == set(frame["label"]) and not samples["warmup"].any()
    (boxes,) = sample_charts.step_time_distribution(samples).data  # one trace, a box per run on the y axis
    assert len(set(boxes.y)) == 3 and len(boxes.x) == len(samples)
    one = prepare_samples(store.samples(frame["run_id"].iloc[0]))
    assert {t.name for t in sample_charts.loss_curve(one).data} == {"warm-up", "measured"}
    detail = stored_runs.run_detail(store.get_run(frame["run_id"].iloc[0]))
    assert detail["headline"] and detail["env"]["tensorflow"] == "2.20.0"


def test_empty_store_first_screen_says_what_to_do():
    assert "Run" in context.EMPTY_STORE_TEXT and "python -m dashbench run" in context.EMPTY_STORE_TEXT
    assert "read-only" in context.EMPTY_STORE_TEXT_READ_ONLY


def test_epochs_table_prices_n_epochs(store):
    frame = compare.compare_frame(store.runs(status="done", accelerator="V100", limit=1), None, None)
    table = compare.epochs_table(frame, prices.catalog(store), 60_000, 5)
    eps = frame["examples_per_sec"].iloc[0]
    price = run_cost.match_price("V100", 1, prices.catalog(store))
    assert table["usd_on_demand"].iloc[0] == pytest.approx(300_000 / eps / 3600 * price["usd_per_hour"])
    assert table["price"].iloc[0] == price["key"]


# -- backends: TensorFlow and JAX runs of one setup, side by side -----------------------------------


@pytest.fixture
def two_backends(tmp_path):
    path = tmp_path / "backends.sqlite"
    ids = dashboard_data.fill_two_backends(path, batch_sizes=(32, 64))
    with Store(path) as s:
        yield s, ids


def test_compare_puts_tf_and_jax_of_one_setup_side_by_side(two_backends):
    store, ids = two_backends
    runs = store.runs()
    frame = compare.compare_frame(runs, prices.catalog(store), None)
    assert len(frame) == 4 and frame["label"].nunique() == 4  # never merged
    # Each setup's TensorFlow row is followed by its JAX row, and every label names its backend.
    assert list(frame["run_id"]) in (
        [ids[("tensorflow", 64)], ids[("jax", 64)], ids[("tensorflow", 32)], ids[("jax", 32)]],
        [ids[("tensorflow", 32)], ids[("jax", 32)], ids[("tensorflow", 64)], ids[("jax", 64)]],
    )
    assert [label.split(" (")[0] for label in frame["label"]][:2] in (
        ["CPU · b64 · fp32 · tensorflow", "CPU · b64 · fp32 · jax"],
        ["CPU · b32 · fp32 · tensorflow", "CPU · b32 · fp32 · jax"],
    )
    fig = charts.throughput(frame)
    assert sum(" · jax" in str(y) for y in fig.data[0].y) == 2
    assert sum(" · tensorflow" in str(y) for y in fig.data[0].y) == 2
    # One backend alone: TensorFlow labels stay as they were; a JAX run still says so.
    tf_only = compare.compare_frame(runs[runs["backend"] == "tensorflow"], None, None)
    assert not tf_only["label"].str.contains("tensorflow").any()
    assert compare.compare_frame(runs[runs["backend"] == "jax"], None, None)["label"].str.contains(" · jax").all()


def test_csv_and_tables_have_the_backend_columns(two_backends):
    store, ids = two_backends
    frame = compare.compare_frame(store.runs(), prices.catalog(store), None)
    back = pd.read_csv(io.BytesIO(compare.csv_bytes(compare.compare_table(frame))))
    assert {"backend", "backend_version"} <= set(back.columns)
    # A TensorFlow result from before backends names its version only in env["tensorflow"].
    versions = {run_id: (b, str(v)) for run_id, b, v in zip(back["run_id"], back["backend"], back["backend_version"])}
    assert versions == {
        ids[("jax", 32)]: ("jax", "0.10.2"),
        ids[("jax", 64)]: ("jax", "0.10.2"),
        ids[("tensorflow", 32)]: ("tensorflow", "2.20.0"),
        ids[("tensorflow", 64)]: ("tensorflow", "2.20.0"),
    }
    table = results.results_table(store.runs())
    assert {"backend", "backend_version"} <= set(table.columns)
    assert sorted(table["backend"]) == ["jax", "jax", "tensorflow", "tensorflow"]


def test_backend_filter_and_sweep_lines_per_backend(two_backends):
    store, ids = two_backends
    runs = store.runs()
    assert store.facets()["backend"] == ["jax", "tensorflow"]
    assert set(store.runs(backend=["jax"])["run_id"]) == {ids[("jax", 32)], ids[("jax", 64)]}
    sweeps = compare.sweep_frame(compare.compare_frame(runs, None, None))
    # The same setup at two batch sizes on each backend: two lines, each named by its backend.
    assert sorted(sweeps["series"].unique()) == [
        "fashion_mnist_cnn · CPU · fp32 · jax",
        "fashion_mnist_cnn · CPU · fp32 · tensorflow",
    ]
    assert len(charts.throughput_vs_batch(sweeps).data) == 2


def test_run_form_backend_goes_into_every_spec():
    state = run_form.run_form_defaults(["cpu"]) | {"run_sweep": "8, 16"}
    assert state["run_backend"] == "tensorflow"
    (spec,), _ = run_form.specs_from_form(state)
    assert spec.backend == "tensorflow"
    state["run_backend"] = "jax"
    (spec,), _ = run_form.specs_from_form(state)
    assert spec.backend == "jax"
    specs, sweep = run_form.specs_from_form(state, sweep=True)
    assert [(s.batch_size, s.backend) for s in specs] == [(8, "jax"), (16, "jax")] and sweep
    with pytest.raises(SpecError, match="backend"):
        run_form.specs_from_form(state | {"run_backend": "torch"})
    # A preset fills the workload, not the framework: the chosen backend stays.
    assert "run_backend" not in run_form.preset_form_values("colab-fashion-mnist", "cpu", quick=True)


# -- shapes, published rows by workload, blanks, the cost legend ---------------------------------


def _full_and_quick(tmp_path):
    """A full-size and a quick-shape fashion_mnist_cnn run on the same CPU at the same batch size."""
    import random

    rng = random.Random(3)
    with Store(tmp_path / "shapes.sqlite") as s:
        full = dashboard_data._finished(
            s, RunSpec(model="fashion_mnist_cnn", batch_size=32, device="cpu", steps=6), "CPU", "cpu", 1, 400.0, [], rng
        )
        quick = dashboard_data._finished(
            s,
            RunSpec(model="fashion_mnist_cnn", batch_size=32, device="cpu", steps=6, image_size=28, width=8),
            "CPU",
            "cpu",
            1,
            3000.0,
            [],
            rng,
        )
        return s.runs(), full, quick, prices.catalog(s)


def test_quick_shape_run_label_says_quick_and_its_shape(tmp_path):
    runs, full, quick, _ = _full_and_quick(tmp_path)
    by_id = {r["run_id"]: r for r in runs.to_dict("records")}
    assert "quick 28px w8" in run_label(by_id[quick])
    assert "quick" not in run_label(by_id[full])
    # Overrides equal to the full-size defaults are a full-size run.
    assert "quick" not in run_label({"model": "resnet50", "accelerator": "CPU", "batch_size": 8, "image_size": 224})
    assert "custom 512px" in run_label({"model": "resnet50", "accelerator": "CPU", "batch_size": 8, "image_size": 512})


def test_compare_keeps_full_size_and_quick_runs_apart(tmp_path):
    runs, full, quick, catalog = _full_and_quick(tmp_path)
    frame = compare.compare_frame(runs, catalog)
    groups = dict(compare.workload_groups(frame))
    assert set(groups) == {"fashion_mnist_cnn", "fashion_mnist_cnn · quick 28px w8"}
    out = compare.speedup_vs(frame, full).set_index("id")
    assert out.loc[full, "speedup"] == 1.0 and pd.isna(out.loc[quick, "speedup"])  # no cross-shape speed-up
    assert compare.group_baseline(groups["fashion_mnist_cnn · quick 28px w8"], full) == quick
    # The epochs table never presents the quick run's time as the full-size model's.
    epochs = compare.epochs_table(frame, catalog, 60_000, 5)
    assert not epochs["label"].str.contains("quick").any() and len(epochs) == 1
    assert any("quick 28px w8" in label for label in compare.epochs_left_out(frame))
    table = compare.compare_table(frame).set_index("run_id")
    assert table.loc[quick, "image_size"] == 28 and table.loc[quick, "width"] == 8
    assert pd.isna(table.loc[full, "width"])
    csv = pd.read_csv(io.BytesIO(compare.csv_bytes(compare.compare_table(frame))), dtype=str, keep_default_na=False)
    row = csv.set_index("run_id").loc[quick]
    assert (row["image_size"], row["seq_len"], row["width"]) == ("28", "", "8")


def test_published_rows_are_grouped_by_workload_with_no_cross_workload_speedup():
    published = reference.rows()
    frame = compare.compare_frame(
        pd.DataFrame(columns=["run_id", "model"]), None, published[published["examples_per_sec"].notna()]
    )
    groups = compare.workload_groups(frame)
    assert len(groups) > 1
    for _name, rows in groups:
        assert rows["model"].nunique() == 1
    base = frame[frame["model"] == "resnet50"]["id"].iloc[0]
    out = compare.speedup_vs(frame, base)
    assert out.loc[out["speedup"].notna(), "model"].eq("resnet50").all()


def test_tables_have_no_none_text_and_the_csv_whole_numbers(store):
    from dashbench.views.common.format import blank_text

    runs = store.runs()
    catalog = prices.catalog(store)
    frame = compare.compare_frame(runs.head(6), catalog, reference.rows())
    frame = compare.speedup_vs(frame, frame["id"].iloc[0])
    for table in (
        compare.compare_table(frame),
        results.results_table(runs, catalog),
        compare.epochs_table(frame, catalog, 60_000, 5),
        compare.published_ratios(reference.rows()),
    ):
        shown = blank_text(table)
        assert not [
            (c, v)
            for c in shown.columns
            for v in shown[c]
            if isinstance(v, str) and v in ("None", "nan", "NaN", "<NA>")
        ]
    table = compare.compare_table(frame)
    assert str(table["batch_size"].dtype) == "Int64"
    csv = compare.csv_bytes(table).decode()
    batch = pd.read_csv(io.StringIO(csv), dtype=str, keep_default_na=False)["batch_size"]
    assert not batch.str.contains(r"\.0$").any() and batch.str.fullmatch(r"\d*").all()


def test_cost_chart_legend_sits_between_title_and_plot():
    frame = pd.DataFrame(
        {
            "label": ["a", "b"],
            "usd_per_million_examples": [1.0, 2.0],
            "usd_per_million_examples_spot": [0.5, 1.0],
            "kind": ["measured"] * 2,
        }
    )
    layout = charts.cost_per_million(frame).to_dict()["layout"]
    assert layout["legend"]["orientation"] == "h" and layout["legend"]["yanchor"] == "bottom"
    assert layout["legend"]["y"] >= 1.0 and layout["legend"]["xanchor"] == "left"
    assert layout["title"]["yref"] == "container" and layout["title"]["yanchor"] == "top"
    assert layout["margin"]["t"] >= 90  # a line for the title and one for the legend above the plot


def test_every_compare_chart_is_what_plotlys_validation_makes_of_it(store):
    """Compare's charts are built unvalidated (charts.unvalidated_figure): each must come out of Plotly's full
    validation unchanged, so a misspelt property or a shorthand Plotly would have expanded fails here."""
    import json

    import plotly.graph_objects as go
    import plotly.io as pio

    from dashbench.views.compare import sections as compare_view

    frame = compare.compare_frame(store.runs(status="done"), prices.catalog(store), reference.rows())
    frame, bases = compare_view.with_speedups(frame, None)
    figures = []
    for section in compare_view.sections(frame, bases, compare.baseline_choices(frame), store):
        figures += [f for f in (section.sweep, section.throughput, section.speedup, section.steps, section.cost) if f]
    figures += [charts.throughput(frame.iloc[0:0]), charts.throughput_vs_batch(frame.iloc[0:0])]
    assert len(figures) >= 6 and any(f.data and f.data[0].type == "scatter" for f in figures)
    for fig in figures:
        validated = go.Figure(fig.to_dict())  # raises on an unknown property or a bad value
        assert json.loads(pio.to_json(validated)) == json.loads(pio.to_json(fig))


def test_run_detail_names_each_flag_once():
    """The Run page's finished panel and Results' run detail show these notes as they are: the note
    already begins with the flag in words, so "contended: contended: …" never appears."""
    import random

    from dashbench.results.result import RunResult

    spec = RunSpec(model="fashion_mnist_cnn", batch_size=64, device="cpu")
    values, _ = dashboard_data.fake_result(spec, "CPU", "cpu", 1, 500.0, ["contended", "above_peak"], random.Random(0))
    values["host_load"] = {"other_cores": 1.6, "cores": 2}
    detail = stored_runs.run_detail(
        {"run_id": "r-1", "status": "done", "spec": spec.to_dict(), "result": RunResult.from_dict(values)}
    )
    assert detail["flags"] == [
        "contended: other processes kept the machine busy while it measured (other processes used 1.6 of 2 cores)",
        "above peak: faster than the hardware's peak, so the measurement is invalid",
    ]


def test_run_label_names_replicas_the_device_count_does_not_say(tmp_path):
    """A --replicas 2 CPU run and a 1-replica run of one batch: two labels, in every place that names a
    run (stored rows, a queued row, the run detail)."""
    import random

    rng = random.Random(5)
    spec = RunSpec(model="fashion_mnist_cnn", batch_size=64, device="cpu", image_size=28, width=8)
    two = spec.replace(replicas=2)
    with Store(tmp_path / "replicas.sqlite") as s:
        one_id = dashboard_data._finished(s, spec, "CPU", "cpu", 1, 900.0, [], rng)
        run_id = s.create_run(two, status="running")
        values, samples = dashboard_data.fake_result(two, "CPU", "cpu", 1, 1200.0, [], rng)
        s.finish_run(run_id, "done", result={**values, "replicas": 2, "per_replica_batch_size": 32})
        queued = s.create_run(two, status="queued")
        runs = s.runs().set_index("run_id")
        detail = stored_runs.run_detail(s.get_run(run_id))
    # The Results table names a run id first (a long name is cut at the column's edge, the id is not).
    labels = {
        i: label.split(" · ", 1)[1] for i, label in zip(runs.index, results.results_table(runs.reset_index())["run"])
    }
    assert labels[run_id].startswith("fashion_mnist_cnn · CPU · 2 replicas · b64 · fp32 · quick 28px w8")
    assert "replicas" not in labels[one_id] and labels[one_id].startswith("fashion_mnist_cnn · CPU · b64")
    assert "2 replicas" in labels[queued] and detail["title"] == f"{labels[run_id]} (#{run_id[-6:]})"
    # A count the device already says (two GPUs, two replicas) is not said twice.
    gpus = run_label(
        {"model": "resnet50", "accelerator": "V100", "accelerator_count": 2, "replicas": 2, "batch_size": 8}
    )
    assert "2×V100 · b8" in gpus and "replicas" not in gpus


def test_quick_try_without_a_preset_builds_the_chosen_models_quick_recipe():
    from dashbench.workloads import registry

    state = run_form.run_form_defaults(["cpu"]) | {"run_quick": True}
    state |= run_form.quick_toggle_values(state)  # what ticking the box puts in the form
    recipe = registry.get("fashion_mnist_cnn").quick_recipe()
    (spec,), _ = run_form.specs_from_form(state)
    assert (spec.width, spec.image_size, spec.batch_size, spec.steps) == (
        recipe["width"],
        None,
        recipe["batch_size"],
        recipe["steps"],
    )
    assert "quick 28px w16" in run_label(spec.to_dict() | {"accelerator": "CPU"})
    # A model chosen in the form after the tick: its own quick shapes, never the other model's.
    (spec,), _ = run_form.specs_from_form(state | {"run_model": "resnet50", "run_batch_size": 8})
    assert (spec.image_size, spec.width) == (registry.get("resnet50").quick["image_size"], None)
    # Unticked: full size, and the default batch size and steps back where the recipe had put them.
    state = state | {"run_quick": False, "run_steps": 7}
    state |= run_form.quick_toggle_values(state)
    (spec,), _ = run_form.specs_from_form(state)
    assert (spec.width, spec.batch_size, spec.steps) == (None, 32, 7)
    assert "width 16" in run_form.quick_caption("fashion_mnist_cnn") and "4 steps" in run_form.quick_caption(
        "fashion_mnist_cnn"
    )


def test_a_refused_launch_names_the_forms_box():
    for batch in (0, -5):
        with pytest.raises(SpecError) as info:
            run_form.specs_from_form(run_form.run_form_defaults(["cpu"]) | {"run_batch_size": batch})
        assert run_form.refusal_text(info.value) == f"batch size: must be an integer >= 1, got {batch}"
    with pytest.raises(SpecError) as info:
        run_form.specs_from_form(run_form.run_form_defaults(["cpu"]) | {"run_sweep": "32,,64"}, sweep=True)
    assert run_form.refusal_text(info.value).startswith("batch sizes: empty item between commas")
