"""The Predict page under AppTest: it opens on an empty store and in read-only mode (tests/views/test_app.py checks it imports no framework), and predicts from a stored run's profile with the measured run beside it."""

from fixtures.app_test import assert_clean, show, start, texts


def test_the_page_opens_on_an_empty_store_and_read_only(tmp_path, monkeypatch):
    for read_only in (False, True):
        at = start(monkeypatch, tmp_path / "empty.sqlite", read_only=read_only)
        show(at, "pages/predict.py")
        assert "Predicted, not measured" in texts(at)
        assert "No stored run carries its step's profile yet" in texts(at)
        at.radio(key="pred_source").set_value("a workload, profiled in a child process").run()
        assert_clean(at)
        assert at.button(key="pred_profile")  # nothing profiled until asked


def test_a_stored_run_is_predicted_on_every_device_with_its_measurement_and_target(tmp_path, monkeypatch):
    from fixtures.planted_chips import reached_block
    from fixtures.stored_runs import SPEC, result_for

    from dashbench.store import Store

    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        measured = result_for(SPEC, 20000.0, accelerator="TPU v6e", precision="mixed_bfloat16")
        store.finish_run(store.create_run(SPEC, run_id="on-v6e"), "done", measured)
        trained = result_for(SPEC, 20000.0, precision="mixed_bfloat16", accuracy=reached_block(500))
        store.finish_run(store.create_run(SPEC.replace(label="acc"), run_id="to-target"), "done", trained)
    at = start(monkeypatch, db, read_only=True)
    show(at, "pages/predict.py")
    assert len(at.selectbox(key="pred_run").options) == 2
    (chart,) = at.get("plotly_chart")
    names = {trace["name"] for trace in __import__("json").loads(chart.proto.spec)["data"]}
    assert {"predicted", "predicted cost", "measured (your runs)", "cheapest to the target"} <= names
    (table,) = at.dataframe
    frame = table.value
    assert "TPU v6e ×1" in set(frame["device"]) and "H100 SXM ×1" in set(frame["device"])
    assert frame.loc[frame["device"] == "TPU v6e ×1", "measured"].item() != ""
    assert "← cheapest" in texts(at) and "500 steps" in texts(at)
    # The step time, the spot price and the calibration are in the full table, built when it is opened.
    assert not {"step", "$/M spot", "calibration"} & set(frame.columns)
    at.session_state["pred_all"] = True
    at.run()
    assert_clean(at)
    shown, full = (d.value for d in at.dataframe)
    assert list(shown.columns) == [c for c in full.columns if c not in ("step", "$/M spot", "calibration")]
    assert {"step", "$/M spot", "calibration"} <= set(full.columns) and len(full) == len(shown)


def test_a_workload_is_profiled_in_a_child_process_and_predicted(tmp_path, monkeypatch):
    at = start(monkeypatch, tmp_path / "empty.sqlite")
    show(at, "pages/predict.py")
    at.radio(key="pred_source").set_value("a workload, profiled in a child process").run()
    at.selectbox(key="pred_model").set_value("llama")
    at.number_input(key="pred_batch").set_value(8)
    for name, value in (("width", 64), ("layers", 2), ("seq_len", 64)):
        at.number_input(key=f"pred_{name}").set_value(value)
    at.button(key="pred_profile").click().run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1
    frame = at.dataframe[0].value
    assert "TPU v6e ×1" in set(frame["device"]) and frame.columns[1] == "≈ tokens/s per chip (predicted)"
