"""The Run page under AppTest as a newcomer drives it: a quick try that follows the model chosen, a
to-accuracy mode that brings real data and says where its files go before launch, and a reload that
still shows what finished (with its MFU note's command as code and its interval in words)."""

import random

import pytest
from fixtures import dashboard_data
from fixtures.app_test import _run_page_without_training, assert_clean, texts
from fixtures.learnable_data import learnable_idx  # noqa: F401 (fixture: IDX files made here)
from fixtures.run_page_plain import plain

from dashbench.cli import main
from dashbench.core.spec import RunSpec
from dashbench.store import TERMINAL, Store
from dashbench.views.run import form as run_form
from dashbench.workloads import registry


def data_notes(at) -> list[str]:
    """The form's notes on where a to-accuracy run's data goes (the machine check says its own)."""
    return [n for n in (plain(i.value) for i in at.info) if "Fashion-MNIST" in n or "image folder" in n]


def stored_specs(db) -> list[dict]:
    with Store(db) as store:
        runs = store.runs().sort_values("created_at")
        specs = [store.get_run(run_id)["spec"] for run_id in runs["run_id"]]
        for run_id in runs["run_id"]:
            store.request_cancel(run_id)
    return specs


def test_resnet50s_quick_recipe_is_batch_8_as_models_prints_it(capsys):
    assert main(["models"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "--model resnet50 " in line]
    assert "--batch-size 8" in line and registry.get("resnet50").quick_recipe()["batch_size"] == 8


@pytest.mark.parametrize("order", ["tick, then model", "model, then tick"])
def test_the_quick_try_follows_the_model_whichever_box_is_set_first(tmp_path, monkeypatch, order):
    db = tmp_path / "quick.sqlite"
    at = _run_page_without_training(monkeypatch, db)
    steps = {
        "tick": lambda: at.checkbox(key="run_quick").check(),
        "model": lambda: at.selectbox(key="run_model").set_value("resnet50"),
    }
    for name in order.split(", then "):
        steps[name]().run()
        assert_clean(at)
    recipe = registry.get("resnet50").quick_recipe()
    captions = [c.value for c in at.caption if c.value.startswith("Quick try of")]
    assert captions == [run_form.quick_caption("resnet50")] and "batch size 8" in captions[0], captions
    assert at.number_input(key="run_batch_size").value == recipe["batch_size"] == 8
    assert at.number_input(key="run_image_size").value == recipe["image_size"]
    assert at.number_input(key="run_steps").value == recipe["steps"]
    at.button(key="run_launch").click().run()  # the batch box left as the quick try set it
    assert_clean(at)
    assert "Not launched" not in texts(at), texts(at)
    (spec,) = stored_specs(db)
    assert (spec["model"], spec["batch_size"], spec["image_size"], spec["steps"]) == (
        "resnet50",
        8,
        recipe["image_size"],
        recipe["steps"],
    )


def test_train_to_accuracy_brings_real_data_and_says_where_its_files_go(tmp_path, monkeypatch, learnable_idx):  # noqa: F811
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # an offline TPU VM: nothing in Keras's cache
    db = tmp_path / "target.sqlite"
    at = _run_page_without_training(monkeypatch, db)
    assert at.selectbox(key="run_data").value == "synthetic" and not data_notes(at)
    at.radio(key="run_mode").set_value("target").run()
    assert_clean(at)
    assert at.selectbox(key="run_data").value == "real"  # synthetic data has no held-out split
    (note,) = data_notes(at)
    assert "No Fashion-MNIST files in ~/.keras/datasets/fashion-mnist" in note
    assert "t10k-images-idx3-ubyte" in note and "Data path" in note and "train/ and validation/" in note

    empty = tmp_path / "empty"
    empty.mkdir()
    at.text_input(key="run_data_path").input(str(empty)).run()
    (note,) = data_notes(at)
    assert f"No Fashion-MNIST files in {empty}" in note
    at.text_input(key="run_data_path").input(str(learnable_idx)).run()
    assert not data_notes(at)  # found: nothing to say
    at.number_input(key="run_width").set_value(4)
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert "Not launched" not in texts(at), texts(at)
    (spec,) = stored_specs(db)
    assert (spec["data"], spec["target_accuracy"], spec["data_path"]) == ("real", 0.9, str(learnable_idx))

    at.radio(key="run_mode").set_value("epochs").run()
    at.selectbox(key="run_data").set_value("folder").run()
    at.text_input(key="run_data_path").input("").run()
    (note,) = data_notes(at)
    assert note.startswith("An image folder needs its path") and "train/ and validation/" in note
    at.radio(key="run_mode").set_value("throughput").run()
    assert not data_notes(at) and at.selectbox(key="run_data").value == "folder"  # a choice made is not undone


def test_a_reload_shows_the_last_finished_runs_of_the_store(tmp_path, monkeypatch):
    db = tmp_path / "earlier.sqlite"
    dashboard_data.fill(db, n_runs=8)
    spec = RunSpec(model="fashion_mnist_cnn", batch_size=64, device="cpu", image_size=28, width=8)
    with Store(db) as store:  # the newest: MFU against a first probe, an interval without an upper end
        run_id = store.create_run(spec, status="running")
        result, samples = dashboard_data.fake_result(spec, "CPU", "cpu", 1, 900.0, [], random.Random(3))
        result.update(peak_source="provisional", examples_per_sec_ci95=[289.1, None])
        store.add_samples(run_id, samples)
        store.finish_run(run_id, "done", result=result)
        newest = store.run_ids(status=sorted(TERMINAL), limit=3)
    assert newest[0] == run_id
    at = _run_page_without_training(monkeypatch, db)  # a new session: it launched nothing
    assert [s.value for s in at.subheader] == ["Last finished in this store"]
    # A run's title is bold with its status; a figure too long for a tile is a bold-labelled line of its own.
    titles = [m.value for m in at.markdown if m.value.startswith("**") and " — status " in m.value]
    assert [next(i for i in newest if i[-6:] in t) for t in titles] == newest, titles
    assert {link.value for link in at.page_link} >= {"Compare these runs", "Every stored run in Results"}
    captions = [c.value for c in at.caption]
    # The MFU note's command as code, not as literal (escaped) backticks.
    assert any("run `python -m dashbench doctor`" in c for c in captions), captions
    assert not any("\\`" in c for c in captions), captions
    assert any("95% CI at least 289.1, no upper end" in plain(c) for c in captions), captions
    assert not any("≥" in c for c in captions)


def test_only_a_commands_characters_become_code():
    from dashbench.views.common.format import md_text, md_text_with_commands

    shown = md_text_with_commands("not calibrated: run `python -m dashbench doctor`")
    assert shown.endswith(" run `python -m dashbench doctor`") and "\\`" not in shown
    # Stored text in backticks with a link, an icon or markup inside stays escaped, backticks and all.
    for hostile in ("`[x](http://e.example)`", "`:material/home:`", "`**bold**`"):
        assert md_text_with_commands(hostile) == md_text(hostile)
