"""bench/convergence.py's verdicts and its document, without training (the script runs the engine)."""

from fixtures import bench_scripts


def load():
    return bench_scripts.load("convergence")


def test_verdicts_table_and_document(tmp_path, monkeypatch):
    conv = load()
    assert conv.verdict([3.0, 2.9, 2.8, 2.7, 2.6, 2.5]) == (True, "falls")
    assert (
        conv.verdict([3.81, 3.18, 3.01, 3.46, 3.28, 3.28])[0] is False
    )  # the flag's quarters pass, the mean check not
    assert conv.verdict([2.0, 3.0, 2.5, 2.6, 2.4, 2.1]) == (False, "loss_not_falling")
    assert conv.verdict([2.0, float("nan")]) == (False, "non-finite loss")
    assert conv.parse_seeds("0-2,7") == [0, 1, 2, 7]
    spec = conv.spec_for("resnet50", 3, False, 4, 2, "tensorflow")
    assert (spec.image_size, spec.batch_size, spec.seed, spec.steps) == (32, 8, 3, 4)
    assert conv.spec_for("conv2d", 0, True, 4, 2, "tensorflow").image_size is None
    rows = [
        {"model": "conv2d", "shapes": "quick", "batch": 16, "seed": s, "ok": s != 1, "why": "x", "losses": [1.0, 0.5]}
        for s in (0, 1)
    ]
    table = conv.table(rows, [0, 1])
    assert "| conv2d | quick | 16 | ✓ 1 → 0.5 | ✗ 1 → 0.5 (x) | 1/2 |" in table
    monkeypatch.setattr(conv, "DOC", tmp_path / "CONVERGENCE.md")
    conv.write_doc("first", "tensorflow-quick")
    conv.write_doc("other", "tensorflow-full")
    conv.write_doc("second", "tensorflow-quick")
    text = (tmp_path / "CONVERGENCE.md").read_text()
    assert "second" in text and "first" not in text and "other" in text
