"""The real Streamlit app under streamlit.testing.v1.AppTest, against real SQLite stores in tmp_path."""

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures import dashboard_data
from fixtures.app_test import (
    APP,
    PAGES,
    TIMEOUT_S,
    _run_page_without_training,
    assert_clean,
    every_compare_column,
    select_rows,
    show,
    start,
    texts,
)
from fixtures.run_page_form import fill_run_form, shown_errors
from streamlit.testing.v1 import AppTest

from dashbench.core.spec import RunSpec, SpecError
from dashbench.store import Store, watch
from dashbench.views.common import store_handles
from dashbench.views.results import runs as results
from dashbench.views.run import form as run_form


@pytest.fixture
def filled(tmp_path):
    db = tmp_path / "runs.sqlite"
    ids = dashboard_data.fill(db, n_runs=60)
    return db, ids


def digest(db: Path) -> str:
    # The main file only: while a reader is open, SQLite keeps its -wal and -shm files beside it.
    return hashlib.sha256(db.read_bytes()).hexdigest()


def test_every_page_renders_on_an_empty_store(tmp_path, monkeypatch):
    at = start(monkeypatch, tmp_path / "new" / "empty.sqlite")
    assert "No runs stored yet" in texts(at)  # the default page is Compare: a first screen, not a blank
    for page in PAGES:
        show(at, page)
    show(at, "pages/run.py")
    assert at.selectbox(key="run_device").options  # at least the CPU
    show(at, "pages/results.py")
    assert "No runs stored yet" in texts(at)
    show(at, "pages/prices.py")
    assert len(at.dataframe) == 2  # the catalog and the published rows


def test_every_page_renders_on_a_store_with_many_runs(filled, monkeypatch):
    db, ids = filled
    at = start(monkeypatch, db)
    for page in PAGES:
        show(at, page)
    show(at, "pages/compare.py")
    # By default the newest run of each setup; the picker offers the others that pass the filters.
    picker = at.multiselect(key="cmp_runs")
    with Store(db, read_only=True) as store:
        every = store.runs(model=at.multiselect(key="cmp_model").value, status="done")["run_id"].tolist()
    assert 0 < len(picker.value) < len(picker.options) == len(every)
    picker.set_value(every).run()
    assert_clean(at)
    # Flags sit next to the figures on Compare, not in a detail view.
    shown = texts(at)
    assert "above peak" in shown and "not on the chosen device" in shown
    # Throughput and cost until the visitor picks more; every chart the runs have can be picked.
    from dashbench.views.compare.sections import CHARTS

    (charts,) = at.get("segmented_control")
    assert charts.value == ["throughput", "cost"] and len(at.get("plotly_chart")) == 2
    offered = [kind for kind, label in CHARTS.items() if label in charts.options]
    assert {"throughput", "cost", "speedup", "steps"} <= set(offered)
    charts.set_value(offered).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) >= 4
    assert at.selectbox(key="cmp_baseline").options
    show(at, "pages/results.py")
    assert len(at.dataframe[0].value) == len(ids)
    assert any(d.proto.label.startswith("Download bundle") for d in at.get("download_button"))


def test_compare_builds_the_epochs_table_only_when_opened(filled, monkeypatch):
    db, _ids = filled
    at = start(monkeypatch, db)
    tables = len(at.dataframe)
    at.session_state["cmp_epochs_open"] = True  # a click on the expander
    at.run()
    assert_clean(at)
    (epochs,) = [d.value for d in at.dataframe if "usd_on_demand" in d.value.columns]
    assert len(at.dataframe) == tables + 1 and len(epochs) and epochs["time"].notna().all()


def test_compare_link_opens_the_requested_runs(filled, monkeypatch):
    db, ids = filled
    at = start(monkeypatch, db)
    at.query_params["runs"] = ids[1]
    show(at, "pages/compare.py")
    assert at.multiselect(key="cmp_runs").value == [ids[1]]


def test_read_only_mode_has_no_run_page_and_no_writing_controls(filled, monkeypatch):
    db, _ = filled
    before = digest(db)
    at = start(monkeypatch, db, read_only=True)
    with pytest.raises(ValueError):
        at.switch_page("pages/run.py")
    for page in PAGES[1:]:
        show(at, page)
        labels = [b.label for b in at.button]
        assert not at.get("file_uploader") and "Delete" not in labels and "Reset all overrides" not in labels
        assert "Save price" not in labels
        # Nor a word about deleting: read-only has no Delete section to point at.
        assert "delete" not in texts(at).lower(), page
    show(at, "pages/compare.py")
    assert len(at.get("plotly_chart")) == 2  # throughput and cost, until the reader picks more
    # The fixture's CPU runs have no price: the hint must not send a read-only reader to a price form.
    (no_price,) = [c.value for c in at.caption if c.value.startswith("No price for")]
    assert "Set one on the Prices page" not in no_price and "writes this database" in no_price
    assert digest(db) == before
    store_handles.forget()  # the dashboard's process ends (its atexit): nothing is left beside the database
    watch.forget(db)
    assert not list(db.parent.glob(db.name + "-*")) and digest(db) == before


def test_read_only_without_a_database_says_so(tmp_path, monkeypatch):
    at = start(monkeypatch, tmp_path / "missing.sqlite", read_only=True)
    assert "No database at" in texts(at)
    assert not (tmp_path / "missing.sqlite").exists()


def test_results_page_deletes_and_imports(filled, monkeypatch, tmp_path):
    db, ids = filled
    other = tmp_path / "other.sqlite"
    with Store(other) as store:
        extra = store.create_run(RunSpec(model="conv2d", batch_size=8), status="running")
        store.finish_run(extra, "failed", error="bundle me")
    bundle = results.bundle_bytes(str(other), run_ids=[extra])

    at = start(monkeypatch, db)
    show(at, "pages/results.py")
    select_rows(at, [ids[0]])
    at.checkbox(key="res_delete_confirm").check().run()
    at.button(key="res_delete_go").click().run()
    assert_clean(at)
    assert "Deleted 1 run." in texts(at)
    # The deleted run is gone from the table, and nothing is selected for the next choice.
    assert f"of {len(ids) - 1} that pass the filters ({len(ids) - 1} stored)" in texts(at)
    assert ids[0] not in at.dataframe[0].value["run_id"].tolist()
    assert "Select the runs to delete in the table above." in texts(at)
    at.file_uploader(key="res_import_0").upload("bundle.json", bundle, "application/json").run()
    at.button(key="res_import_go").click().run()
    assert_clean(at)
    assert "Imported 1 run" in texts(at)
    # Drawn again after the import: the table lists the imported run, the uploader is empty.
    assert f"of {len(ids)} that pass the filters ({len(ids)} stored)" in texts(at)
    assert extra in at.dataframe[0].value["run_id"].tolist()
    assert not at.file_uploader(key="res_import_1").value
    with Store(db, read_only=True) as store:
        assert store.get_run(ids[0]) is None
        assert store.get_run(extra)["error"] == "bundle me"


def test_results_page_refuses_to_delete_a_running_run(filled, monkeypatch):
    """As `delete` without --force: deleting a running run would kill its measurement."""
    db, ids = filled
    with Store(db) as store:
        running = store.create_run(RunSpec(model="conv2d", batch_size=8, device="cpu"), pid=os.getpid())  # alive
    try:
        at = start(monkeypatch, db)
        show(at, "pages/results.py")
        select_rows(at, [ids[0], running])
        at.checkbox(key="res_delete_confirm").check().run()
        at.button(key="res_delete_go").click().run()
        assert_clean(at)
        (refused,) = [e.value for e in at.error if e.value.startswith("Nothing deleted")]
        assert "(running)" in refused and "Cancel it on the Run page first" in refused
        assert "Deleted" not in texts(at)
        assert "Delete the 2 selected runs" in texts(at)  # the selection is kept for after a cancel
        with Store(db, read_only=True) as store:
            assert store.get_run(running)["status"] == "running" and store.get_run(ids[0]) is not None
            assert store.count_runs() == len(ids) + 1
    finally:
        with Store(db) as store:
            store.finish_run(running, "cancelled")


# Markup a foreign bundle could carry in its stored text: an image a browser would fetch, a link,
# HTML, a Streamlit icon and colour directive.
HOSTILE_LABEL = "![x](http://host/p.png) [y](http://host/) <img src=http://host/q.png> :material/bolt: :red[z]"
HOSTILE_ERROR = "![e](http://host/e.png) **loud** `code` :blue[directive] <b>tag</b>"
HOSTILE_FLAG = "![f](http://host/f.png)"


def _assert_no_live_markup(shown: list[str]) -> None:
    for body in shown:
        assert not re.search(r"(?<!\\)\]\(", body), body  # "](": an image or a link
        assert not re.search(r"(?<!\\)<", body), body  # an HTML tag
        assert ":material/" not in body and ":red[" not in body and ":blue[" not in body, body


def test_stored_markup_is_shown_as_text(tmp_path, monkeypatch):
    from dashbench.views.common.format import md_text

    db = tmp_path / "hostile.sqlite"
    with Store(db) as store:
        spec = RunSpec(model="fashion_mnist_cnn", batch_size=8, device="cpu", steps=4, label=HOSTILE_LABEL)
        done = store.create_run(spec)
        result, samples = dashboard_data.fake_result(spec, "CPU", "cpu", 1, 100.0, [HOSTILE_FLAG], random.Random(0))
        store.add_samples(done, samples)
        store.finish_run(done, "done", result=result)
        failed = store.create_run(spec)
        store.finish_run(failed, "failed", error=HOSTILE_ERROR)
    at = start(monkeypatch, db)
    show(at, "pages/results.py")
    select_rows(at, [failed])
    assert md_text(HOSTILE_ERROR) in [e.value for e in at.error]
    assert any(md_text(HOSTILE_LABEL) in m.value for m in at.markdown)
    _assert_no_live_markup(texts(at).splitlines() + [s.value for s in at.subheader])
    select_rows(at, [done])
    assert any(md_text(HOSTILE_FLAG) in w.value for w in at.warning)
    _assert_no_live_markup(texts(at).splitlines() + [m.label for m in at.metric])
    at.query_params["runs"] = done
    show(at, "pages/compare.py")
    shown = texts(at)
    assert md_text(HOSTILE_FLAG) in shown and md_text(HOSTILE_LABEL) in shown  # the flag box, "No price for"
    _assert_no_live_markup(shown.splitlines() + [s.value for s in at.subheader])


def test_prices_page_sets_and_resets_an_override(filled, monkeypatch):
    db, _ = filled
    at = start(monkeypatch, db)
    show(at, "pages/prices.py")
    at.text_input(key="price_device").input("cpu")
    at.selectbox(key="price_unit").set_value("hour")
    at.number_input(key="price_on_demand").set_value(0.5)
    at.button(key="price_save").click().run()
    assert_clean(at)
    with Store(db, read_only=True) as store:
        (row,) = store.price_overrides()
    assert row["device"] == "CPU" and row["on_demand_usd_per_hour"] == 0.5
    show(at, "pages/compare.py")
    assert "No price for: " not in "\n".join(c.value for c in at.caption if "CPU" in c.value)
    show(at, "pages/prices.py")
    at.button(key="price_reset").click().run()
    assert_clean(at)
    with Store(db, read_only=True) as store:
        assert store.price_overrides() == []


def test_run_page_shows_the_queue_live(tmp_path, monkeypatch):
    db = tmp_path / "queue.sqlite"
    with Store(db) as store:
        # Queued first, then "running" in this (alive) test process: the CPU is busy, so the queued run waits.
        waiting = store.create_run(RunSpec(model="conv2d", batch_size=8, device="cpu"), status="queued")
        busy = store.create_run(
            RunSpec(model="fashion_mnist_cnn", batch_size=8, device="cpu", steps=4), status="running", pid=os.getpid()
        )
        store.add_samples(
            busy,
            [
                {"index": 0, "steps": 1, "duration_s": 0.2, "loss": 2.0, "warmup": True},
                {"index": 1, "steps": 1, "duration_s": 0.1, "loss": 1.9, "warmup": False},
            ],
        )
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    shown = texts(at)
    assert "Active runs (2)" in [s.value for s in at.subheader]
    assert "step 2 of 6" in shown and "queued: waiting for the device" in shown
    assert at.button(key=f"cancel_{waiting}") and len(at.get("plotly_chart")) == 1
    # The run measuring now is listed above the queue.
    cancels = [b.key for b in at.button if str(b.key).startswith("cancel_")]
    assert cancels == [f"cancel_{busy}", f"cancel_{waiting}"]
    with Store(db) as store:
        store.finish_run(busy, "cancelled")
        store.request_cancel(waiting)


def test_cancel_from_the_live_panel_ends_a_running_and_a_queued_run(tmp_path, monkeypatch):
    """Real run processes (the stand-in engine of test_jobs: the spec read from the row, the real
    runner and store, sleeping instead of training), cancelled by clicking Cancel on the Run page."""
    from fixtures.job_waits import FAKE_RUN

    from dashbench.jobs import queue

    script = tmp_path / "fake_run.py"
    script.write_text(FAKE_RUN)
    monkeypatch.setattr(queue, "RUN_COMMAND", [sys.executable, str(script)])
    db = tmp_path / "cancel.sqlite"
    # 2000 steps of 50 ms: still going when cancelled; the second waits for the CPU behind it.
    slow = RunSpec(model="conv2d", batch_size=4, device="cpu", steps=2000, seed=50)
    running, queued = queue.submit(slow, db), queue.submit(slow, db)
    try:
        with Store(db, read_only=True) as store:
            deadline = time.monotonic() + 60
            while store.samples(running).empty and time.monotonic() < deadline:
                time.sleep(0.2)  # measuring: the runner's signal handler is in place
            assert not store.samples(running).empty, store.get_run(running)
        at = start(monkeypatch, db)
        show(at, "pages/run.py")
        assert "Active runs (2)" in [s.value for s in at.subheader]
        at.button(key=f"cancel_{queued}").click().run()
        assert_clean(at)
        with Store(db, read_only=True) as store:
            assert store.get_run(queued)["status"] == "cancelled"
        at.button(key=f"cancel_{running}").click().run()
        assert_clean(at)
        with Store(db, read_only=True) as store:
            deadline = time.monotonic() + 30
            while store.get_run(running)["status"] == "running" and time.monotonic() < deadline:
                time.sleep(0.2)
            assert store.get_run(running)["status"] == "cancelled"
        at.run()
        assert_clean(at)
        assert not any(s.value.startswith("Active runs") for s in at.subheader)
    finally:
        for run_id in (running, queued):
            queue.cancel(run_id, db, wait_s=10)


def test_a_tiny_real_jax_run_launched_from_the_run_page_shows_on_compare(tmp_path, monkeypatch):
    """The Run page's launch on JAX end to end: queued, run by a process of its own on the JAX engine, its
    headline and link on the page, its bar on Compare. The TensorFlow path from a launch to a finished run is
    test_cli_accuracy_training's run from this page and tests/jobs/test_jobs.py's real job; TF and JAX runs of one
    setup side by side on Compare, test_compare_shows_tf_and_jax_of_one_setup_as_two_entries."""
    db = tmp_path / "real.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    # conv2d, the smallest workload: half the CPU of fashion_mnist_cnn's build and compiles on JAX.
    fill_run_form(at, model="conv2d", batch_size=4, steps=2, warmup=1, image_size=8, width=2)
    at.selectbox(key="run_backend").set_value("jax")
    at.text_input(key="run_label").input("from the app test")
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert "Queued 1 run(s)." in texts(at)
    with Store(db, read_only=True) as store:
        (run_id,) = store.runs()["run_id"]
        deadline = time.monotonic() + 600  # a guard against hangs only
        while (status := store.get_run(run_id)["status"]) in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(1)
            if status == "queued":  # a rerun starts a queued run once the device is free; while it runs, the
                at.run()  # page's reruns would only take the run's CPU (nothing is checked before it ends)
        run = store.get_run(run_id)
    assert run["status"] == "done", run["error"]
    assert run["spec"]["backend"] == "jax" and run["result"].backend == "jax"
    at.run()  # the page the user is on reruns: the finished run's headline and the link
    assert_clean(at)
    assert any(m.label == "images/s" for m in at.metric)
    assert any(link.proto.label == "Compare these runs" for link in at.get("page_link"))
    at.query_params["runs"] = run_id
    show(at, "pages/compare.py")
    assert at.multiselect(key="cmp_runs").value == [run_id]
    throughput = json.loads(at.get("plotly_chart")[0].proto.spec)
    bars = [str(y) for y in throughput["data"][0]["y"] if "from the app test" in str(y)]
    assert len(bars) == 1 and "jax" in bars[0], bars


def test_the_app_process_never_imports_tensorflow(filled, tmp_path):
    """In a fresh interpreter (other tests in this worker may have imported TF): render every page,
    normal and read-only, then look at sys.modules."""
    db, _ = filled
    script = f"""
import json, os, sys
from streamlit.testing.v1 import AppTest
seen = {{}}
for read_only in ("0", "1"):
    os.environ["DASHBENCH_READ_ONLY"] = read_only
    at = AppTest.from_file({APP!r}, default_timeout={TIMEOUT_S})
    at.run()
    pages = {PAGES!r}[1:] if read_only == "1" else {PAGES!r}
    for page in pages:
        at.switch_page(page).run()
        assert not at.exception, (page, [e.value for e in at.exception])
    seen[read_only] = [m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras")]
print(json.dumps(seen))
"""
    env = dict(os.environ, DASHBENCH_DB=str(db))
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=TIMEOUT_S * 2
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"0": [], "1": []}


def test_leaving_a_preset_drops_its_label(tmp_path, monkeypatch):
    at = start(monkeypatch, tmp_path / "runs.sqlite")
    show(at, "pages/run.py")
    at.selectbox(key="run_preset").set_value("colab-fashion-mnist").run()
    assert at.text_input(key="run_label").value == "preset:colab-fashion-mnist"
    at.selectbox(key="run_preset").set_value("").run()
    assert_clean(at)
    assert at.text_input(key="run_label").value == ""  # a custom run is not filed under the preset


def test_compare_shows_tf_and_jax_of_one_setup_as_two_entries(tmp_path, monkeypatch):
    db = tmp_path / "backends.sqlite"
    ids = dashboard_data.fill_two_backends(db)
    tf, jax = ids[("tensorflow", 64)], ids[("jax", 64)]
    at = start(monkeypatch, db)
    show(at, "pages/compare.py")
    assert sorted(at.multiselect(key="cmp_backend").options) == ["jax", "tensorflow"]
    assert sorted(at.multiselect(key="cmp_runs").value) == sorted([tf, jax])
    throughput = json.loads(at.get("plotly_chart")[0].proto.spec)
    bars = [str(y) for y in throughput["data"][0]["y"] if not str(y).startswith("published")]
    assert len(bars) == 2
    assert "tensorflow" in bars[0] and tf[-6:] in bars[0].replace("<br>", "")
    assert "jax" in bars[1] and jax[-6:] in bars[1].replace("<br>", "")
    table = every_compare_column(at)
    table = table[table["kind"] == "measured"]
    assert list(table["backend"]) == ["tensorflow", "jax"] and list(table["run_id"]) == [tf, jax]
    assert list(table["batch_size"]) == [64, 64] and list(table["accelerator"]) == ["CPU", "CPU"]
    # The backend filter narrows the chosen runs to one backend.
    at.multiselect(key="cmp_backend").set_value(["jax"]).run()
    assert_clean(at)
    assert at.multiselect(key="cmp_runs").value == [jax]
    show(at, "pages/results.py")
    at.multiselect(key="res_backend").set_value(["tensorflow"]).run()
    assert_clean(at)
    assert list(at.dataframe[0].value["run_id"]) == [tf]


def test_run_page_backend_goes_into_the_queued_specs(tmp_path, monkeypatch):
    from dashbench.jobs import queue

    # Nothing starts: the rows stay queued, so their stored specs are what is checked (no training).
    monkeypatch.setattr(queue, "pump", lambda db_path=None: [])
    db = tmp_path / "queued.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    assert at.selectbox(key="run_backend").value == "tensorflow"
    assert at.selectbox(key="run_backend").options == ["tensorflow", "jax"]
    fill_run_form(at, "conv2d", batch_size=4)
    at.selectbox(key="run_backend").set_value("jax")
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert "Queued 1 run(s)." in texts(at)
    at.text_input(key="run_sweep").input("8, 16")
    at.button(key="run_launch_sweep").click().run()
    assert_clean(at)
    with Store(db) as store:
        runs = store.runs()
        assert len(runs) == 3 and set(runs["status"]) == {"queued"} and set(runs["backend"]) == {"jax"}
        specs = [store.get_run(run_id)["spec"] for run_id in runs["run_id"]]
        assert [s["backend"] for s in specs] == ["jax"] * 3
        assert sorted(s["batch_size"] for s in specs) == [4, 8, 16]
        assert runs["sweep_id"].notna().sum() == 2
        for run_id in runs["run_id"]:
            store.request_cancel(run_id)


def test_launch_run_with_a_filled_sweep_field_asks_which_and_queues_nothing(tmp_path, monkeypatch):
    from dashbench.jobs import queue

    monkeypatch.setattr(queue, "pump", lambda db_path=None: [])
    db = tmp_path / "ask.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    at.selectbox(key="run_model").set_value("conv2d")
    at.text_input(key="run_sweep").input("8, 16")
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert any("Nothing launched: the sweep field holds batch sizes" in w.value for w in at.warning)
    assert not db.exists() or Store(db, read_only=True).count_runs() == 0
    # Enter in a field (the sweep field, "Measured steps") submits nothing: the form is built so.
    forms = []

    def walk(node):
        proto = getattr(node, "proto", None)
        if proto is not None and proto.DESCRIPTOR.name == "Block" and proto.WhichOneof("type") == "form":
            forms.append(proto.form)
        for child in (getattr(node, "children", None) or {}).values():
            walk(child)

    walk(at._tree)
    assert [(form.form_id, form.enter_to_submit) for form in forms] == [("run_form", False)]


def _none_text(at: AppTest) -> list:
    """Cells of the shown tables that say "None" (or "nan") where a blank is meant."""
    bad = []
    for frame in at.dataframe:
        table = frame.value
        bad += [(c, v) for c in table.columns for v in table[c] if isinstance(v, str) and v in ("None", "nan", "<NA>")]
    return bad


def test_compare_shows_quick_and_full_size_runs_in_separate_sections(tmp_path, monkeypatch):
    db = tmp_path / "shapes.sqlite"
    rng = random.Random(5)
    with Store(db) as store:
        for extra, eps in (({}, 400.0), ({"image_size": 28, "width": 8}, 3000.0)):
            spec = RunSpec(model="fashion_mnist_cnn", batch_size=32, device="cpu", steps=6, **extra)
            dashboard_data._finished(store, spec, "CPU", "cpu", 1, eps, [], rng)
    at = start(monkeypatch, db)  # Compare is the default page
    heads = [h.value for h in at.subheader]
    assert "Workload: fashion\\_mnist\\_cnn" in heads, heads
    assert any("quick 28px w8" in h for h in heads), heads
    assert not _none_text(at)
    numbers = every_compare_column(at)
    assert not _none_text(at)
    assert "image_size" in numbers and str(numbers["batch_size"].dtype) == "Int64"


def test_empty_store_compare_groups_published_rows_by_workload(tmp_path, monkeypatch):
    at = start(monkeypatch, tmp_path / "empty.sqlite")
    heads = [h.value for h in at.subheader if h.value.startswith("Workload:")]
    assert len(heads) > 1 and len(heads) == len(set(heads)), heads
    assert not _none_text(at)


# A stand-in for `dashbench doctor`: stores a warning verdict for this host in the --db it is given.
FAKE_DOCTOR = [
    sys.executable,
    "-c",
    (
        "import sys, time; from dashbench.store import Store, this_host; time.sleep(0.5); "
        "db = sys.argv[sys.argv.index('--db') + 1]; s = Store(db); "
        "s.add_calibration({'host': this_host(), 'device': 'cpu', 'backend': 'jax', 'verdict': 'warning', "
        "'peaks': {'float32': 0.25}, 'stopwatch_ratio': 1.01, 'reasons': ['planted reason']}); s.close()"
    ),
]


def test_run_page_says_when_this_machine_was_last_checked_and_checks_it(tmp_path, monkeypatch):
    from dashbench.jobs import checks

    db = tmp_path / "check.sqlite"
    monkeypatch.setattr(checks, "DOCTOR_COMMAND", FAKE_DOCTOR)
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    assert "never checked — run the check" in texts(at)
    at.button(key="run_check_machine").click().run()
    assert_clean(at)
    assert "Checking this machine…" in texts(at) and at.button(key="run_check_machine").disabled
    deadline = time.monotonic() + 60
    while checks.state(db)["running"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert checks.state(db)["returncode"] == 0
    at.run()
    assert_clean(at)
    shown = texts(at).replace("\\", "").replace("\u200b", "")  # stored text is shown escaped (md_text)
    assert re.search(r"Figures on this machine last checked \d{4}-\d\d-\d\d \d\d:\d\d UTC: warning", shown), shown
    assert "cpu · jax: warning, float32 matmul 0.25 TFLOP/s, stopwatch 1.010×; planted reason" in shown
    assert [w.value for w in at.warning if "last checked" in w.value]  # shown at the verdict's level


def test_quick_try_without_a_preset_launches_the_models_quick_recipe(tmp_path, monkeypatch):
    from dashbench.workloads import registry

    db = tmp_path / "quick.sqlite"
    at = _run_page_without_training(monkeypatch, db)
    at.checkbox(key="run_quick").check().run()
    assert_clean(at)
    recipe = registry.get("fashion_mnist_cnn").quick_recipe()
    assert at.number_input(key="run_width").value == recipe["width"] and at.number_input(key="run_width").disabled
    assert at.number_input(key="run_batch_size").value == recipe["batch_size"]
    assert at.number_input(key="run_steps").value == recipe["steps"]
    at.button(key="run_launch").click().run()
    assert_clean(at)
    # Chosen in the form after the tick: resnet50 runs at its own quick shapes, not fashion_mnist_cnn's width.
    at.selectbox(key="run_model").set_value("resnet50")
    at.number_input(key="run_batch_size").set_value(8)
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert at.number_input(key="run_image_size").value == registry.get("resnet50").quick["image_size"]
    with Store(db) as store:
        runs = store.runs().sort_values("created_at")
        specs = [store.get_run(run_id)["spec"] for run_id in runs["run_id"]]
        labels = [results.short_label(runs, run_id) for run_id in runs["run_id"]]
        for run_id in runs["run_id"]:
            store.request_cancel(run_id)
    assert [(s["model"], s["image_size"], s["width"], s["batch_size"], s["steps"]) for s in specs] == [
        ("fashion_mnist_cnn", None, recipe["width"], recipe["batch_size"], recipe["steps"]),
        ("resnet50", registry.get("resnet50").quick["image_size"], None, 8, recipe["steps"]),
    ]
    assert "quick 28px w16" in labels[0] and "quick 32px" in labels[1]


def test_run_page_refuses_a_bad_batch_size_in_words(tmp_path, monkeypatch):
    db = tmp_path / "refused.sqlite"
    at = _run_page_without_training(monkeypatch, db)
    # The box itself stops at 1 (its − button, and a typed -5 is not taken); the spec's check stays behind it.
    assert at.number_input(key="run_batch_size").min == 1
    for batch in (0, -5):
        state = run_form.run_form_defaults(["cpu"]) | {"run_batch_size": batch}
        with pytest.raises(SpecError, match="batch_size: must be an integer >= 1"):
            run_form.specs_from_form(state)
    # An empty item in the sweep field is a typo pointed out, not skipped.
    at.number_input(key="run_batch_size").set_value(32)
    at.text_input(key="run_sweep").input("32,,64")
    at.button(key="run_launch_sweep").click().run()
    assert_clean(at)
    (error,) = shown_errors(at)
    assert error.startswith("Not launched: batch sizes: empty item between commas in '32,,64'")
    assert not db.exists() or Store(db, read_only=True).count_runs() == 0
