"""Model file names: `run --model` and the Run page take the same names, spaces and Unicode included,
and refuse the same ones with the rule named; the page offers only what its launch takes."""

from pathlib import Path

import pytest
from fixtures.app_test import assert_clean, show, start, texts

from dashbench.cli import main
from dashbench.core.spec import SpecError
from dashbench.store import Store
from dashbench.views.run import form as run_form
from dashbench.workloads import model_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "models"
TINY = ["--batch-size", "8", "--steps", "2", "--warmup", "1", "--device", "cpu"]
UNICODE_BUILDER = "\n\ndef build_é():\n    return build_tiny()\n"
RULE = "a model file's name is one line of at most 200 characters before its suffix"


@pytest.fixture
def models_folder(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    mlp = (EXAMPLES / "mlp.py").read_text()
    (folder / "my model.py").write_text(mlp)
    (folder / "modèle é.py").write_text(mlp + UNICODE_BUILDER)
    (folder / "two\nlines.py").write_text(mlp)  # a control character: no identity can hold it
    (folder / ("a" * 201 + ".py")).write_text(mlp)
    return folder


def test_the_cli_runs_files_named_with_spaces_and_unicode(models_folder, tmp_path, capfd):
    db = tmp_path / "runs.sqlite"
    for name, builder in (("my model.py", "build_tiny"), ("modèle é.py", "build_é")):
        assert main(["run", "--model", f"{models_folder / name}:{builder}", "--db", str(db), *TINY]) == 0
        assert "unknown model" not in capfd.readouterr().err
    with Store(db) as store:
        runs = store.runs()
    assert sorted(runs["status"]) == ["done", "done"]
    assert sorted(model_file.family(m) for m in runs["model"]) == ["modèle é.py:build_é", "my model.py:build_tiny"]


def test_the_cli_refuses_a_name_no_identity_can_hold_naming_the_rule(models_folder, tmp_path, capfd):
    db = tmp_path / "runs.sqlite"
    for name in ("two\nlines.py", "a" * 201 + ".py"):
        assert main(["run", "--model", f"{models_folder / name}:build_tiny", "--db", str(db), *TINY]) == 2
        err = capfd.readouterr().err
        assert err.startswith("error: model: ") and RULE in err and "unknown model" not in err, err
    if db.exists():
        with Store(db) as store:
            assert store.runs().empty


def test_the_page_offers_exactly_what_its_launch_takes(models_folder):
    offered = [c for c in run_form.model_choices(str(models_folder)) if model_file.looks_like_file(c)]
    assert offered == [
        "modèle é.py:build",
        "modèle é.py:build_tiny",
        "modèle é.py:build_é",
        "my model.py:build",
        "my model.py:build_tiny",
    ]
    for choice in offered:  # each one a launch takes
        spec = run_form.build_spec({"model": choice, "batch_size": 8}, str(models_folder))
        assert model_file.family(spec.model) == choice
    for refused in ("two\nlines.py:build", "a" * 201 + ".py:build"):
        with pytest.raises(SpecError, match=RULE):
            run_form.build_spec({"model": refused, "batch_size": 8}, str(models_folder))


def test_a_launch_from_the_page_queues_a_unicode_named_file(models_folder, tmp_path, monkeypatch):
    from dashbench.jobs import queue

    monkeypatch.setattr(queue, "pump", lambda db_path=None: [])  # the row stays queued: no training here
    monkeypatch.setenv("DASHBENCH_MODELS_DIR", str(models_folder))
    db = tmp_path / "page.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    options = at.selectbox(key="run_model").options
    assert "modèle é.py:build_é" in options and not any("lines.py" in o for o in options)
    at.selectbox(key="run_model").set_value("modèle é.py:build_é")
    at.selectbox(key="run_device").set_value("cpu")
    at.number_input(key="run_batch_size").set_value(8)
    at.button(key="run_launch").click().run()
    assert_clean(at)
    assert "Not launched" not in texts(at), texts(at)
    with Store(db) as store:
        (row,) = [store.get_run(r) for r in store.runs()["run_id"]]
    assert row["status"] == "queued" and row["spec"]["model"].startswith("modèle é.py:build_é@")
