"""To-accuracy through the command line: the to-accuracy options of run, sweep and preset (bad input in
one line naming the field), and a to-accuracy run's record in list, show, the CSV and a bundle.
Real tiny training with the learnable set: tests/cli/test_cli_accuracy_training.py."""

import csv
import io
import json

import pandas as pd
import pytest
from fixtures.learnable_data import learnable_idx  # noqa: F401 (fixture: IDX files made here)
from fixtures.stored_runs import result_for

from dashbench.cli import main
from dashbench.core import accuracy
from dashbench.core.spec import RunSpec
from dashbench.results.result import RunResult
from dashbench.store import Store

SPEC = RunSpec(
    model="fashion_mnist_cnn",
    batch_size=64,
    device="cpu",
    width=16,
    data="real",
    data_path="/data/fm",
    target_accuracy=0.9,
    max_epochs=6,
    seeds=3,
    label="to-acc",
)


def seed_run(seed: int, reached: bool, epochs: int) -> dict:
    curve = [
        {
            "wall_s": 1.5 * e + 0.01 * seed,
            "step": 10 * e,
            "epoch": float(e),
            "train_loss": 2.0 / e,
            "val_loss": 1.8 / e,
            "val_accuracy": min(0.5 + 0.15 * e, 0.95) if reached else 0.4 + 0.01 * e,
        }
        for e in range(1, epochs + 1)
    ]
    return {
        "seed": seed,
        "reached": reached,
        "time_to_target_s": curve[-1]["wall_s"] if reached else None,
        "steps_to_target": 10 * epochs if reached else None,
        "epochs_to_target": float(epochs) if reached else None,
        "train_s": 1.2 * epochs,
        "eval_s": 0.3 * epochs,
        "total_s": 1.5 * epochs,
        "final_val_accuracy": curve[-1]["val_accuracy"],
        "curve": curve,
    }


def accuracy_block(runs: list[dict], target=0.9, epochs=None) -> dict:
    return accuracy.summarize(
        runs,
        target=target,
        epochs=epochs,
        max_epochs=6 if target else None,
        steps_per_epoch=10,
        eval_every_steps=10,
        dataset={"name": "fashion_mnist", "train_examples": 640, "validation_examples": 200, "classes": 10},
        load_s=0.25,
        compile_s=2.0,
    )


@pytest.fixture
def db(tmp_path):
    """Two to-accuracy runs (2 of 3 seeds reached: done; none reached: not_reached) and a throughput run."""
    path = tmp_path / "acc.sqlite"
    with Store(path) as store:
        for name, runs in (
            ("reached", [seed_run(0, True, 3), seed_run(1, True, 4), seed_run(2, False, 6)]),
            ("missed", [seed_run(0, False, 6), seed_run(1, False, 6), seed_run(2, False, 6)]),
        ):
            spec = SPEC.replace(label=name)
            block = accuracy_block(runs)
            run_id = store.create_run(spec, run_id=f"acc-{name}")
            result = RunResult.from_dict(result_for(spec, 800.0, accuracy=block))
            store.finish_run(run_id, accuracy.final_status(block), result.to_dict())
        plain = RunSpec(model="fashion_mnist_cnn", batch_size=64, device="cpu", steps=4, label="throughput")
        store.finish_run(store.create_run(plain, run_id="plain"), "done", result_for(plain, 900.0))
    return path


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, field",
    [
        (["--target-accuracy", "1.5", "--data", "real"], "target_accuracy"),
        (["--target-accuracy", "0", "--data", "real"], "target_accuracy"),
        (["--target-accuracy", "abc", "--data", "real"], "target_accuracy"),
        (["--target-accuracy", "0.9", "--data", "real", "--max-epochs", "0"], "max_epochs"),
        (["--target-accuracy", "0.9"], "target_accuracy"),  # synthetic data: no held-out split
        (["--epochs", "5"], "epochs"),
        (["--target-accuracy", "0.9", "--epochs", "5", "--data", "real"], "epochs"),
        (["--seeds", "3"], "seeds"),
        (["--seeds", "0", "--epochs", "2", "--data", "real"], "seeds"),
        (["--eval-every", "x"], "eval_every"),
    ],
)
def test_bad_to_accuracy_input_is_one_line_naming_the_field_in_run_sweep_and_preset(argv, field, capsys, tmp_path):
    db = tmp_path / "none.sqlite"
    code, out, err = run_cli(
        capsys, "run", "--model", "fashion_mnist_cnn", "--batch-size", 8, "--no-store", "--json", *argv
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and field in err.split(":", 2)[1] + err, err
    obj = json.loads(out)
    assert obj["status"] == "invalid" and obj["field"] == field
    code, _, err = run_cli(capsys, "sweep", "--model", "fashion_mnist_cnn", "--batch-sizes", "8,16", "--db", db, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and field in err, err
    code, _, err = run_cli(capsys, "preset", "colab-fashion-mnist", "--device", "cpu", "--quick", "--db", db, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not db.exists()  # nothing stored, not even an empty database


def test_help_names_the_options_and_the_not_reached_exit_code(capsys):
    for command in ("run", "sweep", "preset"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        for option in ("--target-accuracy", "--max-epochs", "--epochs", "--steps-per-epoch", "--eval-every", "--seeds"):
            assert option in out, (command, option)
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "4 target not reached" in " ".join(capsys.readouterr().out.split())


def test_list_and_its_json_carry_the_to_accuracy_columns_and_filter_not_reached(db, capsys):
    code, out, _ = run_cli(capsys, "list", "--db", db, "--json")
    rows = {row["run_id"]: row for row in json.loads(out)}
    assert code == 0 and set(rows) == {"acc-reached", "acc-missed", "plain"}
    reached, missed, plain = rows["acc-reached"], rows["acc-missed"], rows["plain"]
    assert (reached["status"], missed["status"]) == ("done", "not_reached")
    assert (reached["target_accuracy"], reached["reached"], reached["seeds"]) == (0.9, 2, 3)
    assert reached["time_to_target_s"] == pytest.approx((4.5 + 6.01) / 2)  # median of the two that reached it
    assert reached["epochs_to_target"] == pytest.approx(3.5) and reached["time_to_target_max_s"] == pytest.approx(6.01)
    assert (missed["reached"], missed["time_to_target_s"], missed["epochs_to_target"]) == (0, None, None)
    assert missed["final_val_accuracy"] == pytest.approx(0.46) and missed["eval_share"] == pytest.approx(0.2)
    assert all(plain[c] is None for c in ("target_accuracy", "reached", "time_to_target_s", "epochs_to_target"))

    code, out, _ = run_cli(capsys, "list", "--db", db)
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert "to target" in out.splitlines()[0] and "epochs→target" in out.splitlines()[0]
    assert "2/3" in lines["acc-reached"] and "5.3 s" in lines["acc-reached"]
    assert "0/3" in lines["acc-missed"] and "not_reached" in lines["acc-missed"]

    code, out, _ = run_cli(capsys, "list", "--db", db, "--status", "not_reached", "--json")
    assert code == 0 and [row["run_id"] for row in json.loads(out)] == ["acc-missed"]
    with Store(db, read_only=True) as store:
        assert "not_reached" in store.facets()["status"]  # the Results and Compare status filters offer it


def test_show_prints_the_headline_and_the_curve_of_every_seed(db, capsys):
    code, out, _ = run_cli(capsys, "show", "--db", db, "acc-reached")
    assert code == 0
    assert "to accuracy: target 0.9 reached by 2 of 3 seeds within 6 epochs" in out
    assert "median (min 4.5 s, max 6.01 s over 2 seeds)" in out and "3.5 epochs to target (median)" in out
    assert "compile 2 s and data loading 0.25 s apart; evaluation 20% of the timed time" in out
    for seed in range(3):
        assert f"seed {seed}: " in out
    table = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit() and "." in line.split()[0]]
    assert len(table) == 3 + 4 + 6  # one line per evaluation, every seed
    assert table[0] == [
        "1.00",
        "10",
        "1.50",
        "0.6500",
        "1.8000",
        "2.0000",
    ]  # epoch, step, wall, val acc/loss, train loss
    code, out, _ = run_cli(capsys, "show", "--db", db, "acc-missed")
    assert "acc-missed" in out.splitlines()[0] and ": not_reached" in out.splitlines()[0]
    assert "target 0.9 NOT reached within 6 epochs: 0 of 3 seeds reached it; best validation accuracy 0.4600" in out
    code, out, _ = run_cli(capsys, "show", "--db", db, "acc-missed", "--json")
    shown = json.loads(out)
    assert shown["status"] == "not_reached" and len(shown["result"]["accuracy"]["runs"][2]["curve"]) == 6


def test_a_bundle_round_trips_a_to_accuracy_run_and_its_status(db, capsys, tmp_path):
    bundle, other = tmp_path / "acc.json", tmp_path / "other.sqlite"
    assert run_cli(capsys, "export", "--db", db, "--out", bundle)[0] == 0
    code, out, err = run_cli(capsys, "import", "--db", other, bundle)
    assert code == 0 and "imported 3 runs" in out, err
    with Store(db, read_only=True) as a, Store(other, read_only=True) as b:
        for run_id in ("acc-reached", "acc-missed"):
            first, second = a.get_run(run_id), b.get_run(run_id)
            assert second["status"] == first["status"]
            assert second["result"].accuracy == first["result"].accuracy
    # A second import adds nothing; a damaged curve is refused naming the field, the store unchanged.
    assert "0 runs" in run_cli(capsys, "import", "--db", other, bundle)[1]
    data = json.loads(bundle.read_text())
    runs = data["runs"] if isinstance(data, dict) else data
    damaged = next(r for r in runs if r["run_id"] == "acc-missed")
    damaged["run_id"] = "acc-damaged"
    damaged["result"]["accuracy"]["runs"][0]["curve"][0]["val_accuracy"] = "high"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "import", "--db", other, bad)
    assert code == 2 and "val_accuracy" in err and len(err.strip().splitlines()) == 1
    with Store(other, read_only=True) as store:
        assert len(store.runs()) == 3


def test_the_compare_csv_carries_the_to_accuracy_columns(db):
    from dashbench.costs import prices, reference
    from dashbench.views.compare import numbers as compare
    from dashbench.views.compare import sections as compare_view

    with Store(db, read_only=True) as store:
        runs = store.runs()
        frame = compare.compare_frame(runs, prices.catalog(store), reference.rows().iloc[0:0])
        frame = compare_view.with_memory(frame, store)
    table = compare.compare_table(frame)
    rows = {row["run_id"]: row for row in csv.DictReader(io.StringIO(compare.csv_bytes(table).decode()))}
    assert {"time_to_target_s", "reached", "target_accuracy", "epochs_to_target"} <= set(table.columns)
    assert float(rows["acc-reached"]["time_to_target_s"]) == pytest.approx(5.255)
    assert (rows["acc-reached"]["reached"], rows["acc-missed"]["reached"], rows["plain"]["reached"]) == ("2", "0", "")
    assert pd.isna(table.set_index("run_id").loc["acc-missed", "time_to_target_s"])


def test_a_sweep_gives_every_point_the_to_accuracy_fields_and_exits_4_when_some_missed(
    tmp_path, capsys, monkeypatch, learnable_idx
):
    from dashbench.cli import sweep_cmd
    from dashbench.jobs import queue

    queued = []
    monkeypatch.setattr(queue, "submit", lambda spec, db, **kw: queued.append(spec) or f"p{len(queued)}")
    ends = iter([["done", "not_reached"], ["done", "done"], ["done", "failed"]])

    def wait(run_ids, db, sizes, *_ticker):
        return [{"run_id": r, "batch_size": b, "status": s} for r, b, s in zip(run_ids, sizes, next(ends))]

    monkeypatch.setattr(sweep_cmd, "_wait", wait)
    argv = [
        "sweep",
        "--model",
        "fashion_mnist_cnn",
        "--width",
        "16",
        "--batch-sizes",
        "32,64",
        "--data",
        "real",
        "--data-path",
        learnable_idx,
        "--target-accuracy",
        "0.9",
        "--max-epochs",
        "3",
        "--seeds",
        "2",
        "--db",
        tmp_path / "s.sqlite",
    ]
    assert [run_cli(capsys, *argv)[0] for _ in range(3)] == [4, 0, 1]
    assert [s.batch_size for s in queued[:2]] == [32, 64]
    assert {(s.target_accuracy, s.max_epochs, s.seeds, s.data) for s in queued} == {(0.9, 3, 2, "real")}


def test_the_run_form_sends_the_chosen_mode_and_the_live_panel_reads_each_evaluation():
    from dashbench.views.run import form as run_form
    from dashbench.views.run import live

    state = {
        **run_form.run_form_defaults(["cpu"]),
        "run_model": "fashion_mnist_cnn",
        "run_data": "real",
        "run_data_path": " /data/fm ",
        "run_mode": "epochs",
        "run_epochs": 3,
        "run_steps_per_epoch": 7,
        "run_seeds": 2,
    }
    values = run_form.mode_values(state)
    assert values == {"epochs": 3, "steps_per_epoch": 7, "seeds": 2}  # eval_every 0: after every epoch
    assert run_form.mode_values({**state, "run_mode": "throughput"}) == {}
    assert run_form.mode_values({**state, "run_mode": "target"})["target_accuracy"] == 0.9
    filled = run_form.preset_form_values("colab-fashion-mnist", "cpu")  # no data files needed to fill the form
    assert (filled["run_mode"], filled["run_epochs"], filled["run_steps_per_epoch"], filled["run_data"]) == (
        "epochs",
        5,
        100,
        "real",
    )
    view = live.live_view(
        {
            "status": "running",
            "phase": "seed 2/3 · epoch 3 of ≤ 20: validation accuracy 0.874",
            "steps_done": 999,
            "steps_total": 20,
        }
    )
    assert view.fraction == pytest.approx((1 + 3 / 20) / 3) and "validation accuracy 0\\.874" in view.text
    assert "step 999" not in view.text  # a to-accuracy run's steps are not a throughput run's measured steps
    ended = live.live_view({"status": "not_reached"})
    assert ended.finished and ended.fraction == 1.0 and "without reaching its target" in ended.text


def test_show_json_carries_the_cost_to_target_at_the_price_row_it_matches(db, capsys):
    # The runs measured on the CPU: no price until one is set for this machine.
    code, out, _ = run_cli(capsys, "show", "--db", db, "acc-reached", "--json")
    cost = json.loads(out)["cost_to_target"]
    assert code == 0 and cost["usd"] is None and cost["price_key"] is None and cost["price_note"] == "no price"
    assert "cost to target: no price for this device" in run_cli(capsys, "show", "--db", db, "acc-reached")[1]

    assert (
        run_cli(capsys, "prices", "set", "--device", "CPU", "--unit", "hour", "--on-demand", "3.6", "--db", db)[0] == 0
    )
    code, out, _ = run_cli(capsys, "show", "--db", db, "acc-reached", "--json")
    cost = json.loads(out)["cost_to_target"]
    median_s = (4.5 + 6.01) / 2  # the two seeds that reached the target
    assert code == 0 and cost["time_to_target_s"] == pytest.approx(median_s) and cost["usd_per_hour"] == 3.6
    assert cost["usd"] == pytest.approx(median_s * 3.6 / 3600) and cost["price_key"] and cost["price_note"] is None
    code, out, _ = run_cli(capsys, "show", "--db", db, "acc-reached")
    assert f"cost to target: ${median_s * 3.6 / 3600:,.4g} at {cost['price_key']} ($3.6/h, on-demand)" in out

    # Nothing to price where no seed reached the target, nor for a throughput run.
    for run_id in ("acc-missed", "plain"):
        code, out, _ = run_cli(capsys, "show", "--db", db, run_id, "--json")
        assert code == 0 and "cost_to_target" not in json.loads(out)
