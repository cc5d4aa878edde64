"""An LM trains to a target validation loss: the teacher text's held-out split and entropy floor, `run`
on both backends through the CLI to a loss reached in seconds, what `show` and `list` say of it, the
one-line refusals (bad value, a target at or below the floor), and the Run page's target box."""

import json
import math
import re

import numpy as np
import pytest
from run_page_form import fill_run_form, shown_errors
from test_app import assert_clean, show, start, texts

from dashbench import catalog, lm_text
from dashbench.cli import main
from dashbench.engine import frameworks
from dashbench.spec import RunSpec, SpecError
from dashbench.store import Store

# Vocabulary 512 (the smallest llama width), one block; the loss starts near ln 512 = 6.24.
TINY = ["--model", "llama", "--device", "cpu", "--seq-len", "32", "--width", "16", "--layers", "1",
        "--batch-size", "16", "--steps-per-loop", "10", "--eval-every", "20"]
TARGET = 5.9  # reached after a few hundred steps at Adam 1e-3
EVALUATION = re.compile(r"epoch [\d.e-]+ of ≤ \d+: validation loss (\d+\.\d{3}) at step (\d+)")


@pytest.fixture(autouse=True)
def small_cpu_probe(monkeypatch):
    monkeypatch.setattr(frameworks, "CPU_PROBE_SIZE", 512)


def run_cli(capfd, *argv):
    code = main([str(a) for a in argv])
    out, err = capfd.readouterr()
    return code, out, err


def test_the_held_out_text_is_disjoint_the_same_every_time_and_the_floor_is_the_teachers_loss():
    x_train, y_train, x_val, y_val = lm_text.splits(512, 32, seed=0)
    again = lm_text.splits(512, 32, seed=0)
    assert all((a == b).all() for a, b in zip((x_train, y_train, x_val, y_val), again))
    assert x_train.dtype == np.int32 and x_val.shape == (lm_text.VALIDATION_TOKENS // 32, 32)
    assert (y_val[:, :-1] == x_val[:, 1:]).all()
    held_out = {row.tobytes() for row in np.concatenate([x_val, y_val[:, -1:]], axis=1)}
    assert not any(row.tobytes() in held_out for row in np.concatenate([x_train, y_train[:, -1:]], axis=1))
    assert not (lm_text.splits(512, 32, seed=1)[2] == x_val).all()
    # The floor is what a model that knows the teacher scores: its cross-entropy on the held-out text.
    table = lm_text.successors(512)
    probability = (table[x_val] == y_val[..., None]).sum(axis=-1) / lm_text.SUCCESSORS
    teacher_loss = float(-np.log(probability).mean())
    floor = lm_text.entropy_floor(512, 32)
    assert floor < math.log(lm_text.SUCCESSORS) and abs(teacher_loss - floor) < 0.02


def test_bad_targets_are_one_line_each_and_nothing_is_stored(tmp_path, capfd):
    db = tmp_path / "refused.sqlite"
    floor = lm_text.entropy_floor(512, 32)
    cases = [
        (["--target-loss", "0"], "error: target_loss: must be a finite number > 0"),
        (["--target-loss", "-1"], "error: target_loss: must be a finite number > 0"),
        (["--target-loss", "inf"], "target_loss: must be a number, got 'inf'"),
        (["--target-loss", "1.2"], f"error: target_loss: 1.2 is at or below the teacher's entropy floor {floor:.4f} nats"),
        (["--target-accuracy", "0.5"], "error: target_accuracy: llama trains to a validation loss: use target_loss"),
        (["--target-loss", "4", "--target-accuracy", "0.5"], "error: target_accuracy: llama trains to a validation"),
        (["--target-loss", "4", "--epochs", "2"], "error: epochs: a fixed epoch count and target_loss exclude"),
    ]
    for extra, line in cases:
        code, out, err = run_cli(capfd, "run", *TINY, *extra, "--db", db)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and line in lines[0], (extra, err)
    with Store(db) as store:
        assert store.runs().empty
    with pytest.raises(SpecError, match="^target_loss: 1.384 is at or below"):
        catalog.check_spec(RunSpec(model="llama", batch_size=1, seq_len=32, width=16, layers=1, target_loss=1.384))
    assert RunSpec(model="llama", batch_size=1, seq_len=32, width=16, layers=1, target_loss=floor + 0.01).to_accuracy


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_run_trains_to_the_target_loss_and_show_and_list_name_the_loss(tmp_path, capfd, backend):
    db = tmp_path / f"{backend}.sqlite"
    code, out, err = run_cli(capfd, "run", *TINY, "--backend", backend, "--target-loss", TARGET, "--seeds", "2",
                             "--db", db, "--json")
    assert code == 0, err[-3000:]
    evaluations = [(float(loss), int(step)) for loss, step in EVALUATION.findall(err)]
    assert evaluations and [step for _, step in evaluations][:2] == [20, 40]
    result = json.loads(out)
    block = result["accuracy"]
    assert block["metric"] == "val_loss" and block["target"] == TARGET and block["reached"] == 2
    assert block["dataset"]["name"] == lm_text.DATASET_NAME and block["dataset"]["classes"] == 512
    assert block["dataset"]["loss_floor"] == pytest.approx(lm_text.entropy_floor(512, 32))
    for seed_run in block["runs"]:
        curve = seed_run["curve"]
        assert seed_run["reached"] and seed_run["steps_to_target"] == curve[-1]["step"]
        assert curve[-1]["val_loss"] <= TARGET < min(p["val_loss"] for p in curve[:-1])  # stopped at the first
        assert curve[0]["val_loss"] > curve[-1]["val_loss"] and 0 < seed_run["final_val_accuracy"] < 1
    assert [r["seed"] for r in block["runs"]] == [0, 1]
    assert result["steps"] == sum(r["steps_to_target"] for r in block["runs"])
    assert result["unit"] == "tokens" and result["examples_per_sec"] > 0

    code, out, _ = run_cli(capfd, "show", "--db", db, result["run_id"])
    assert code == 0
    assert f"target validation loss {TARGET:g} reached by 2 of 2 seeds" in out
    median_step = np.median([r["steps_to_target"] for r in block["runs"]])
    assert re.search(rf"validation loss \d\.\d\d reached at step {median_step:.0f} \(median\) after [\d.]+ m?s", out), out
    assert "teacher's entropy floor" in out and "validation accuracy" not in out.split("seed 0:")[0]
    code, out, _ = run_cli(capfd, "list", "--db", db)
    assert f"loss ≤ {TARGET:g}" in out and "2/2" in out
    code, out, _ = run_cli(capfd, "list", "--db", db, "--json")
    (row,) = json.loads(out)
    assert (row["target_loss"], row["target_accuracy"], row["reached"]) == (TARGET, None, 2)
    assert row["steps_to_target"] == median_step and row["final_val_loss"] <= TARGET


def test_the_run_page_offers_a_loss_target_for_the_lm_and_refuses_one_below_the_floor(tmp_path, monkeypatch):
    from dashbench.jobs import queue

    monkeypatch.setattr(queue, "pump", lambda db_path=None: [])  # the row stays queued: no training
    db = tmp_path / "page.sqlite"
    at = start(monkeypatch, db)
    show(at, "pages/run.py")
    at.selectbox(key="run_model").set_value("llama").run()
    at.radio(key="run_mode").set_value("target").run()
    assert_clean(at)
    keys = {box.key for box in at.number_input}
    assert "run_target_loss" in keys and "run_target_accuracy" not in keys
    assert at.number_input(key="run_target_loss").value == pytest.approx(3.3)  # MLPerf's, the default
    assert at.selectbox(key="run_data").value == "synthetic"  # its own held-out text: no files needed
    fill_run_form(at, "llama", batch_size=4, seq_len=32, width=16, target_loss=1.0)
    at.button(key="run_launch").click().run()
    (error,) = [e for e in shown_errors(at) if "Not launched" in e]
    assert "target validation loss: 1 is at or below the teacher's entropy floor" in error
    at.number_input(key="run_target_loss").set_value(4.0)
    at.button(key="run_launch").click().run()
    assert "Not launched" not in texts(at), texts(at)
    with Store(db) as store:
        (run_id,) = store.runs()["run_id"]
        spec = store.get_run(run_id)["spec"]
        store.request_cancel(run_id)
    assert (spec["target_loss"], spec["target_accuracy"], spec["data"]) == (4.0, None, "synthetic")
