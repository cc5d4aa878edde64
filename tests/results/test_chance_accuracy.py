"""A to-accuracy run stuck at chance says so. A 2-class image folder of blank images (no model can tell
its classes apart, as with labels that do not follow the images) trains for real to 0.500 at every
evaluation; `show`, the Run page and Results end its result with "accuracy stayed at chance (0.50 for
2 classes): check the labels and the learning rate"."""

import json

import pytest
from fixtures.app_test import _run_page_without_training, select_rows, show, start
from fixtures.run_page_plain import plain

from dashbench.cli import main
from dashbench.engine import frameworks
from dashbench.results import accuracy_text

HINT = "accuracy stayed at chance (0.50 for 2 classes): check the labels and the learning rate"


@pytest.fixture(autouse=True)
def small_cpu_probe(monkeypatch):
    monkeypatch.setattr(frameworks, "CPU_PROBE_SIZE", 512)


def blank_folder(root, train: int = 8, validation: int = 4, side: int = 28):
    """train/ and validation/ with classes a and b, every image the same black square."""
    from PIL import Image

    for split, count in (("train", train), ("validation", validation)):
        for name in ("a", "b"):
            (root / split / name).mkdir(parents=True)
            for index in range(count):
                Image.new("L", (side, side)).save(root / split / name / f"{index}.png")
    return root


def test_a_run_that_never_leaves_chance_says_so_in_show_and_on_the_pages(tmp_path, capfd, monkeypatch):
    db = tmp_path / "chance.sqlite"
    folder = blank_folder(tmp_path / "blank")
    code = main(
        [
            "run",
            "--model",
            "fashion_mnist_cnn",
            "--width",
            "4",
            "--batch-size",
            "8",
            "--device",
            "cpu",
            "--data",
            "folder",
            "--data-path",
            str(folder),
            "--target-accuracy",
            "0.9",
            "--max-epochs",
            "2",
            "--db",
            str(db),
            "--json",
        ]
    )
    out, err = capfd.readouterr()
    assert code == 4, err[-2000:]  # trained, missed the target
    result = json.loads(out)
    curve = result["accuracy"]["runs"][0]["curve"]
    assert len(curve) == 2 and {p["val_accuracy"] for p in curve} == {0.5}
    assert result["accuracy"]["dataset"]["classes"] == 2

    assert main(["show", "--db", str(db), result["run_id"]]) == 0
    shown = capfd.readouterr().out
    assert "NOT reached within 2 epochs" in shown and HINT in shown

    at = _run_page_without_training(monkeypatch, db)  # a reload: the store's last finished run
    assert any(HINT in plain(c.value) for c in at.caption), [c.value for c in at.caption]
    at = show(start(monkeypatch, db), "pages/results.py")
    select_rows(at, [result["run_id"]])
    captions = [c.value for c in at.caption]
    assert any(HINT in plain(c) for c in captions), captions
    # This CPU's MFU is against a first probe: its note names the command as code, not as literal backticks.
    assert any("run `python -m dashbench doctor`" in c for c in captions) and not any("\\`" in c for c in captions)


def test_chance_is_said_only_while_every_evaluation_stays_there():
    def accuracy(points, classes=2):
        run = {"curve": [{"val_accuracy": v} for v in points]}
        return {"target": 0.9, "dataset": {"classes": classes}, "runs": [run], "reached": 0}

    assert accuracy_text.chance_hint(accuracy([0.5, 0.51, 0.49])) == HINT
    assert accuracy_text.chance_hint(accuracy([0.5, 0.6])) == ""  # it learned something
    assert accuracy_text.chance_hint(accuracy([0.1, 0.1], classes=10)).startswith(
        "accuracy stayed at chance (0.10 for 10 classes)"
    )
    assert accuracy_text.chance_hint(accuracy([])) == ""
    assert accuracy_text.chance_hint({"dataset": {"classes": 2}}) == ""
    assert HINT in accuracy_text.headline(accuracy([0.5, 0.5]))
