"""To-accuracy for real: the seed CNN at quick shapes trains on the learnable set (tests/fixtures/learnable_data.py)
through `run`, `preset` and the Run page, and what it stored reads back through list, show and the CSV."""

import json
import re
import time
from pathlib import Path

from fixtures.cli_training import run_cli, small_cpu_probe  # noqa: F401 (fixture: a small CPU probe)
from fixtures.learnable_data import learnable_idx  # noqa: F401 (fixture: IDX files made here)
from fixtures.run_page_form import fill_run_form, shown_errors

from dashbench.store import Store

CNN = ["--model", "fashion_mnist_cnn", "--width", "16", "--batch-size", "64", "--device", "cpu", "--data", "real"]
EVALUATION = re.compile(r"epoch (\d+) of ≤ (\d+): validation accuracy (0\.\d{3})")


def test_run_trains_to_the_target_and_list_show_and_csv_read_it_back(tmp_path, capfd, learnable_idx):
    db = tmp_path / "acc.sqlite"
    code, out, err = run_cli(
        capfd, "run", *CNN, "--data-path", learnable_idx, "--target-accuracy", "0.9", "--max-epochs", "8", "--db", db
    )
    assert code == 0, err[-2000:]
    evaluations = EVALUATION.findall(err)  # one progress line per evaluation, as it comes
    assert evaluations and all(limit == "8" for _, limit, _ in evaluations)
    assert [int(epoch) for epoch, _, _ in evaluations] == list(range(1, len(evaluations) + 1))
    assert float(evaluations[-1][2]) >= 0.9 > max([float(a) for _, _, a in evaluations[:-1]] + [0])
    assert "to accuracy: target 0.9 reached by 1 of 1 seed within 8 epochs" in out
    assert re.search(r"time to target [\d.]+ (s|ms); \d epochs to target", out)
    assert re.search(r"compile [\d.]+ s and data loading [\d.]+ m?s apart; evaluation \d+% of the timed time", out)

    code, out, _ = run_cli(capfd, "list", "--db", db, "--json")
    (row,) = json.loads(out)
    assert (row["status"], row["target_accuracy"], row["reached"], row["seeds"]) == ("done", 0.9, 1, 1)
    assert row["epochs_to_target"] == len(evaluations) and 0 < row["time_to_target_s"]
    assert row["examples_per_sec"] > 0  # a to-accuracy run is a throughput run too
    code, out, _ = run_cli(capfd, "show", "--db", db, row["run_id"])
    curve = [line.split() for line in out.splitlines() if re.match(r"\s+\d+\.\d\d\s+\d+\s", line)]
    assert [float(point[0]) for point in curve] == [float(e) for e, _, _ in evaluations]
    assert [point[3][:5] for point in curve] == [a for _, _, a in evaluations]  # the same curve, to 3 places


def test_an_unreachable_target_over_two_seeds_ends_not_reached_with_exit_4(tmp_path, capfd, learnable_idx):
    db = tmp_path / "missed.sqlite"
    # 4% of the learnable set's labels are wrong on purpose: 1.0 is out of reach.
    code, out, err = run_cli(
        capfd,
        "run",
        *CNN,
        "--data-path",
        learnable_idx,
        "--target-accuracy",
        "1",
        "--max-epochs",
        "1",
        "--seeds",
        "2",
        "--db",
        db,
        "--json",
    )
    assert code == 4, err[-2000:]
    assert "seed 1/2 · epoch 1 of ≤ 1: validation accuracy" in err and "seed 2/2 · epoch 1 of ≤ 1" in err
    result = json.loads(out)
    runs = result["accuracy"]["runs"]
    assert [r["seed"] for r in runs] == [0, 1] and not any(r["reached"] for r in runs)
    assert all(len(r["curve"]) == 1 for r in runs) and result["accuracy"]["reached"] == 0
    code, out, _ = run_cli(capfd, "list", "--db", db, "--status", "not_reached")
    assert code == 0 and "not_reached" in out and "0/2" in out
    code, out, _ = run_cli(capfd, "show", "--db", db, result["run_id"])
    assert "NOT reached within 1 epoch: 0 of 2 seeds" in out and "seed 1: did not reach the target" in out


def test_the_seed_000_preset_at_quick_shapes_sits_next_to_the_articles_times(tmp_path, capfd, learnable_idx):
    db = tmp_path / "preset.sqlite"
    code, out, err = run_cli(
        capfd, "preset", "colab-fashion-mnist", "--device", "cpu", "--quick", "--data-path", learnable_idx, "--db", db
    )
    assert code == 0, err[-2000:]
    assert "5 epochs × 4 steps, evaluated after each" in err
    assert re.findall(r"epoch (\d) of 5: validation accuracy", err) == ["1", "2", "3", "4", "5"]
    per_epoch = re.search(r"validation accuracy after each epoch ((?:0\.\d{4}(?:, )?){5})$", out, re.M)
    assert per_epoch, out
    assert re.search(r"this run: 5 epochs in [\d.]+ m?s \(training and evaluation\)", out)
    assert "published: Colab Fashion-MNIST · TPU v2-8: “40-odd” seconds for 5 epochs" in out
    assert "published: Colab Fashion-MNIST · K80: “over 2 minutes” for 5 epochs" in out
    assert "not the article's setup (width 16, batch_size 64, steps_per_epoch 4)" in out
    with Store(db, read_only=True) as store:
        (run_id,) = store.runs()["run_id"]
        run = store.get_run(run_id)
    assert (
        run["status"] == "done" and run["spec"]["epochs"] == 5 and run["spec"]["label"] == "preset:colab-fashion-mnist"
    )
    code, out, _ = run_cli(capfd, "show", "--db", db, run_id)
    assert per_epoch.group(1) in out and "“40-odd” seconds for 5 epochs" in out


def test_the_run_page_launches_a_to_accuracy_run_that_lands_with_its_curve(tmp_path, monkeypatch, learnable_idx):
    from streamlit.testing.v1 import AppTest

    from dashbench.views.run import live

    db = tmp_path / "page.sqlite"
    monkeypatch.setenv("DASHBENCH_DB", str(db))
    monkeypatch.delenv("DASHBENCH_READ_ONLY", raising=False)
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("pages/run.py").run()
    assert not at.exception
    # First, as a user would: the choice redraws the page with its boxes (the form's unsent values with it).
    at.radio(key="run_mode").set_value("target").run()
    fill_run_form(at, batch_size=64, width=16, target_accuracy=0.9, max_epochs=8)
    assert at.selectbox(key="run_data").value == "real"  # the mode brought real data; set back by hand:
    at.selectbox(key="run_data").set_value("synthetic")
    at.button(key="run_launch").click().run()
    # Bad input is one line naming the box: synthetic data has no held-out split; a folder without files.
    assert not at.exception
    assert shown_errors(at) == [
        "Not launched: target accuracy: needs real data with a held-out split: use data real "
        "(Fashion-MNIST IDX train + t10k files) or data folder (train/ and validation/)"
    ]
    at.selectbox(key="run_data").set_value("real")
    at.text_input(key="run_data_path").input(str(tmp_path / "nowhere"))
    at.button(key="run_launch").click().run()
    assert len(shown_errors(at)) == 1 and shown_errors(at)[0].startswith(
        "Not launched: data path: no Fashion-MNIST file"
    )
    at.text_input(key="run_data_path").input(str(learnable_idx))
    at.button(key="run_launch").click().run()
    assert not at.exception and any("Queued 1 run(s)." in s.value for s in at.success)
    seen = []
    with Store(db, read_only=True) as store:
        (run_id,) = store.runs()["run_id"]
        deadline = time.monotonic() + 600  # a guard against hangs only
        while (now := store.get_run(run_id)["status"]) in ("queued", "running") and time.monotonic() < deadline:
            from dashbench.jobs import queue

            view = live.live_view(queue.progress(run_id, str(db)))
            if "validation accuracy" in view.text:
                seen.append(view.text)
            time.sleep(0.3)
            if now == "queued":  # the live panel's refresh: a rerun starts the queued run once the device is free
                at.run()
        run = store.get_run(run_id)
    assert run["status"] == "done", run["error"]
    assert run["spec"]["target_accuracy"] == 0.9 and run["spec"]["data"] == "real"
    curve = run["result"].accuracy["runs"][0]["curve"]
    assert curve and curve[-1]["val_accuracy"] >= 0.9 and run["result"].accuracy["reached"] == 1
    # What the live panel said while it trained, where the run was slow enough to be seen between evaluations.
    assert all(re.search(r"epoch \d+ of ≤ 8", text.replace("\\", "")) for text in seen)
    at.run()  # the finished run's headline, and the link to Compare
    assert not at.exception
    captions = [re.sub(r"\\(.)", r"\1", c.value.replace("\u200b", "")) for c in at.caption]
    assert any(c.startswith("To accuracy: target 0.9 reached by 1 of 1 seed within 8 epochs") for c in captions), (
        captions
    )
    assert any(link.proto.label == "Compare these runs" for link in at.get("page_link"))
    at.query_params["runs"] = run_id  # the run lands on Compare, in its time-to-target section
    at.switch_page("pages/compare.py").run()
    assert not at.exception and "Time and cost to target" in [s.value for s in at.subheader]
