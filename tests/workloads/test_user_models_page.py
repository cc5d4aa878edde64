"""Your own model from the Run page: the models folder's files are offered (read, never imported, by
the page), a launch queues the file's identity and hash, and nothing outside the folder can be chosen."""

import os
from pathlib import Path

import pytest
from fixtures.app_test import assert_clean, every_compare_column, show, start, texts

from dashbench.core.spec import SpecError
from dashbench.store import Store
from dashbench.views.run import form as run_form
from dashbench.workloads import model_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"


@pytest.fixture
def models_folder(tmp_path):
    folder = tmp_path / "models"
    (folder / "nested").mkdir(parents=True)
    (folder / "mlp.py").write_text((EXAMPLES / "mlp.py").read_text())
    # A file that would leave a mark if the page imported it.
    (folder / "nested" / "loud.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\ndef build():\n    pass\n"
    )
    outside = tmp_path / "outside.py"
    outside.write_text("def build():\n    pass\n")
    os.symlink(outside, folder / "link.py")  # inside by name, outside by real path
    return folder


def test_the_folder_offers_its_builders_and_keras_files_and_nothing_outside(models_folder, tmp_path):
    (models_folder / "tiny.keras").write_bytes(b"not read here")
    assert run_form.model_choices(str(models_folder))[-4:] == [
        "mlp.py:build",
        "mlp.py:build_tiny",
        "nested/loud.py:build",
        "tiny.keras",
    ]
    assert not (tmp_path / "imported").exists()  # listed from the syntax tree, not imported
    for choice, words in [
        ("../outside.py:build", "is outside the models folder"),
        ("link.py:build", "is outside the models folder"),
        (f"{tmp_path}/outside.py:build", "is outside the models folder"),
    ]:
        with pytest.raises(SpecError, match=words) as caught:
            run_form.build_spec({"model": choice, "batch_size": 8}, str(models_folder))
        assert caught.value.field == "model"
    with pytest.raises(SpecError, match="no models folder was named at server start"):
        run_form.build_spec({"model": "mlp.py:build", "batch_size": 8}, None)


def test_a_launch_from_the_page_queues_the_files_identity_and_hash(models_folder, tmp_path, monkeypatch):
    from dashbench.jobs import queue

    monkeypatch.setattr(queue, "pump", lambda db_path=None: [])  # the row stays queued: no training here
    monkeypatch.setenv("DASHBENCH_MODELS_DIR", str(models_folder))
    db = tmp_path / "page.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    options = at.selectbox(key="run_model").options
    assert "mlp.py:build_tiny" in options and "nested/loud.py:build" in options and "link.py:build" not in options
    at.selectbox(key="run_model").set_value("mlp.py:build_tiny")
    at.selectbox(key="run_device").set_value("cpu")
    at.number_input(key="run_batch_size").set_value(8)
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert "Not launched" not in texts(at), texts(at)
    with Store(db) as store:
        (row,) = [store.get_run(r) for r in store.runs()["run_id"]]
    expected = model_file.reference(str(models_folder / "mlp.py") + ":build_tiny")
    assert row["status"] == "queued" and {k: row["spec"][k] for k in expected} == expected
    assert row["spec"]["model"].startswith("mlp.py:build_tiny@")
    assert not (tmp_path / "imported").exists()


def test_a_read_only_dashboard_imports_no_user_code(models_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("DASHBENCH_MODELS_DIR", str(models_folder))
    at = start(monkeypatch, tmp_path / "ro.sqlite", read_only=True)
    for page in ("pages/compare.py", "pages/results.py", "pages/prices.py"):  # no Run page when read-only
        show(at, page)
    assert not (tmp_path / "imported").exists()


def test_a_keras_file_from_the_models_folder_runs_from_the_page_and_shows_on_compare(tmp_path, monkeypatch):
    """End to end on JAX: a .keras file chosen from the folder, queued, run by its own process, its
    model named on the page and its bar on Compare under the file's identity."""
    import json
    import time

    from fixtures.keras_files import save_tiny_keras

    folder = tmp_path / "models"
    folder.mkdir()
    save_tiny_keras(folder / "tiny.keras")
    monkeypatch.setenv("DASHBENCH_MODELS_DIR", str(folder))
    db = tmp_path / "real.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    at.selectbox(key="run_model").set_value("tiny.keras")
    at.selectbox(key="run_device").set_value("cpu")
    at.selectbox(key="run_backend").set_value("jax")
    for name, value in (("batch_size", 8), ("steps", 2), ("warmup", 1)):
        at.number_input(key=f"run_{name}").set_value(value)
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert "Queued 1 run(s)." in texts(at), texts(at)
    with Store(db, read_only=True) as store:
        (run_id,) = store.runs()["run_id"]
        deadline = time.monotonic() + 600  # a guard against hangs only
        while (status := store.get_run(run_id)["status"]) in ("queued", "running") and time.monotonic() < deadline:
            time.sleep(1)
            if status == "queued":
                at.run()
        run = store.get_run(run_id)
    assert run["status"] == "done", run["error"]
    identity = model_file.reference(str(folder / "tiny.keras"))["model"]
    assert run["spec"]["model"] == identity and run["result"].model_info["source"] == "keras"
    at.run()
    assert_clean(at)
    at.query_params["runs"] = run_id
    show(at, "pages/compare.py")
    assert at.multiselect(key="cmp_runs").value == [run_id]
    assert json.loads(at.get("plotly_chart")[0].proto.spec)["data"][0]["x"]  # its throughput bar
    assert every_compare_column(at)["model"].tolist() == [identity]


def test_a_bad_model_file_launched_from_the_page_stores_nothing(tmp_path, monkeypatch):
    """The launch checks the file in a process of its own before storing the run: a builder whose
    input cannot be made is named on the page, and no row is written."""
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "ints.py").write_text(
        "import keras\n\ndef build():\n    i = keras.Input((4,), dtype='int32', name='ids')\n"
        "    return keras.Model(i, keras.layers.Dense(2)(keras.ops.cast(i, 'float32')))\n"
    )
    monkeypatch.setenv("DASHBENCH_MODELS_DIR", str(folder))
    db = tmp_path / "page.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    at.selectbox(key="run_model").set_value("ints.py:build")
    at.selectbox(key="run_device").set_value("cpu")
    at.number_input(key="run_batch_size").set_value(8)
    at.button(key="run_launch").click().run()
    shown = texts(at)
    assert "Not launched" in shown and "int32 and feeds no Embedding" in shown, shown
    if db.exists():
        with Store(db, read_only=True) as store:
            assert store.runs().empty
