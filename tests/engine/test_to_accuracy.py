"""Training to a target accuracy, for real on tiny shapes: the learnable set made in
tests/fixtures/learnable_data.py, the seed CNN at width 16, TensorFlow in this process and JAX in a run
process of its own (Keras picks one backend per process). A run reaches the target and stops
early; an unreachable one ends not_reached; several seeds give their curves and a median; a fixed
epoch count trains every epoch; the image folder feeds the same training; bad input is one line."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from fixtures.child_env import child_env
from fixtures.learnable_data import TRAIN, VALIDATION, learnable_folder, learnable_idx, learnable_idx_gz  # noqa: F401

from dashbench.core import accuracy
from dashbench.core.spec import RunSpec, SpecError
from dashbench.engine import accuracy_data
from dashbench.jobs import runner
from dashbench.results.result import RunResult
from dashbench.store import Store
from dashbench.workloads import catalog

TINY = dict(model="fashion_mnist_cnn", batch_size=64, width=16, device="cpu")


def run_stored(spec, db, run_id=None):
    events = []

    def seen(event):
        if event["event"] == "evaluation" and run_id is not None:
            with Store(db) as store:  # what the live panel reads while the run goes
                event = {**event, "stored_phase": store.get_run(run_id)["phase"]}
        events.append(event)

    result = runner.execute(spec, db_path=db, run_id=run_id, on_event=seen)
    with Store(db) as store:
        row = store.get_run(result.run_id)
    RunResult.check(result.to_dict())  # the shape the store and bundles hold it to
    return result, row, [e for e in events if e["event"] == "evaluation"]


def test_three_seeds_reach_the_target_and_stop_early_with_three_curves_and_a_median(learnable_idx, tmp_path):
    spec = RunSpec(**TINY, data="real", data_path=str(learnable_idx), target_accuracy=0.85, max_epochs=6, seeds=3)
    result, row, evaluations = run_stored(spec, tmp_path / "r.sqlite")
    record = result.accuracy
    assert row["status"] == result.status == "done" and row["result"].accuracy == record
    runs = record["runs"]
    assert [r["seed"] for r in runs] == [0, 1, 2] and record["reached"] >= 2
    assert record["dataset"] == {
        "name": "fashion_mnist",
        "train_examples": TRAIN,
        "validation_examples": VALIDATION,
        "classes": 10,
    }
    per_epoch = TRAIN // 64
    assert record["steps_per_epoch"] == record["eval_every_steps"] == per_epoch and record["max_epochs"] == 6
    for run in runs:
        curve = run["curve"]
        assert [p["step"] for p in curve] == [per_epoch * (i + 1) for i in range(len(curve))]
        assert all(b["wall_s"] > a["wall_s"] for a, b in zip(curve, curve[1:]))
        if run["reached"]:  # it stopped at the first evaluation past the target, before max_epochs
            assert curve[-1]["val_accuracy"] >= 0.85 and all(p["val_accuracy"] < 0.85 for p in curve[:-1])
            assert len(curve) < 6 and run["epochs_to_target"] == len(curve)
            assert run["time_to_target_s"] == curve[-1]["wall_s"] <= run["total_s"]
            assert run["train_s"] + run["eval_s"] <= run["total_s"]
    times = sorted(r["time_to_target_s"] for r in runs if r["reached"])
    assert record["time_to_target_median_s"] == pytest.approx(
        times[len(times) // 2] if len(times) % 2 else (times[0] + times[1]) / 2
    )
    assert record["time_to_target_min_s"] == times[0] and record["time_to_target_max_s"] == times[-1]
    # Throughput over the training steps only: one sample per training call, all seeds.
    assert result.steps == sum(r["curve"][-1]["step"] for r in runs) == result.samples
    assert result.examples_per_sec > 0 and record["compile_s"] > 0 and record["load_s"] >= 0
    texts = [e["text"] for e in evaluations]
    assert len(texts) == sum(len(r["curve"]) for r in runs)
    assert texts[0] == f"seed 1/3 · epoch 1 of ≤ 6: validation accuracy {runs[0]['curve'][0]['val_accuracy']:.3f}"


def test_an_unreachable_target_ends_not_reached_with_its_result_stored(learnable_idx_gz, tmp_path):
    spec = RunSpec(**TINY, data="real", data_path=str(learnable_idx_gz), target_accuracy=1.0, max_epochs=2)
    result, row, evaluations = run_stored(spec, tmp_path / "r.sqlite", run_id="missed")
    assert row["status"] == result.status == "not_reached"
    assert [e["stored_phase"] for e in evaluations] == [e["text"] for e in evaluations]  # the live panel's line
    run = result.accuracy["runs"][0]
    assert run["reached"] is False and run["time_to_target_s"] is None and len(run["curve"]) == 2
    assert result.accuracy["reached"] == 0 and result.accuracy["time_to_target_median_s"] is None
    assert [e["text"].split(":")[0] for e in evaluations] == ["epoch 1 of ≤ 2", "epoch 2 of ≤ 2"]
    assert row["result"].examples_per_sec == result.examples_per_sec > 0  # still a throughput run


def test_fixed_epochs_on_an_image_folder_evaluate_every_k_steps(learnable_folder):
    from dashbench.engine import loop

    spec = RunSpec(**TINY, data="folder", data_path=str(learnable_folder), epochs=2, eval_every=4)
    result = loop.run(spec)
    record = result.accuracy
    assert result.status == "done" and record["target"] is None and record["epochs"] == 2
    assert record["dataset"]["name"] == "folder" and record["dataset"]["classes"] == 10
    total = 2 * (TRAIN // 64)
    run = record["runs"][0]
    assert [p["step"] for p in run["curve"]] == [*range(4, total, 4), total]  # and one at the end
    assert run["reached"] is None and record["reached"] == 0
    assert run["curve"][-1]["epoch"] == 2.0 and run["final_val_accuracy"] > 0.5  # it learned


JAX_RUN = [
    "-m",
    "dashbench",
    "run",
    "--backend",
    "jax",
    "--json",
    "--model",
    "fashion_mnist_cnn",
    "--batch-size",
    "64",
    "--width",
    "16",
    "--device",
    "cpu",
    "--data",
    "real",
]


def test_jax_trains_to_the_target_and_stops_early(learnable_idx, tmp_path):
    """JAX's own part of training to a target: its trainer and evaluation, through a run process. Ending
    not_reached is the backend-independent engine/to_accuracy.py, proven on TensorFlow here
    (test_an_unreachable_target_ends_not_reached_with_its_result_stored) and with the CLI's exit 4
    (test_cli_accuracy_training): a second JAX process for it cost ~10 s of CPU."""
    db = str(tmp_path / "r.sqlite")
    reached = subprocess.run(
        [
            sys.executable,
            *JAX_RUN,
            "--data-path",
            str(learnable_idx),
            "--db",
            db,
            "--target-accuracy",
            "0.8",
            "--max-epochs",
            "6",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )
    assert reached.returncode == 0, reached.stderr[-3000:]
    result = RunResult.from_dict(json.loads(reached.stdout))
    assert result.backend == "jax" and result.status == "done"
    # The compiler's count of one step (uint8 images scaled inside it) beside the layers' count.
    assert result.flops_source == "analytic" and result.compiler_flops_per_example > 0
    run = result.accuracy["runs"][0]
    assert run["reached"] and len(run["curve"]) < 6 and run["curve"][-1]["val_accuracy"] >= 0.8
    assert all(p["val_accuracy"] < 0.8 for p in run["curve"][:-1])  # it stopped at the first past the target
    with Store(db) as store:
        assert store.get_run(result.run_id)["status"] == "done"


# -- bad input: one line naming the field, before any run exists -----------------------------------


@pytest.mark.parametrize(
    "fields, field, words",
    [
        (dict(target_accuracy=0.0), "target_accuracy", "(0, 1]"),
        (dict(target_accuracy=1.2), "target_accuracy", "(0, 1]"),
        (dict(target_accuracy=math.nan), "target_accuracy", "(0, 1]"),
        (dict(target_accuracy=0.9, max_epochs=0), "max_epochs", ">= 1"),
        (dict(epochs=0), "epochs", ">= 1"),
        (dict(target_accuracy=0.9, epochs=3), "epochs", "exclude each other"),
        (dict(target_accuracy=0.9, eval_every=0), "eval_every", ">= 1"),
        (dict(target_accuracy=0.9, seeds=0), "seeds", ">= 1"),
        (dict(target_accuracy=0.9, data="synthetic"), "target_accuracy", "held-out split"),
        (dict(epochs=2, data="synthetic"), "epochs", "held-out split"),
        (dict(max_epochs=3), "max_epochs", "to-accuracy"),
        (dict(seeds=3), "seeds", "to-accuracy"),
        (dict(target_accuracy=0.9, repeats=3), "repeats", "seeds"),
        (dict(target_accuracy=0.9, data="folder", data_path=None), "data_path", "train/ and validation/"),
    ],
)
def test_bad_to_accuracy_specs_name_the_field(fields, field, words):
    values = {**TINY, "data": "real", **fields}
    with pytest.raises(SpecError) as info:
        RunSpec(**values)
    assert info.value.field == field and words in str(info.value) and "\n" not in str(info.value)


def test_bad_data_is_refused_before_the_run(learnable_folder, learnable_idx, tmp_path):
    import shutil

    def refused(path, data="folder") -> str:
        with pytest.raises(SpecError) as info:
            catalog.check_spec(RunSpec(**TINY, data=data, data_path=str(path), epochs=1))
        assert info.value.field == "data_path" and "\n" not in str(info.value)
        return str(info.value)

    no_validation = tmp_path / "no_validation"
    shutil.copytree(learnable_folder / "train", no_validation / "train")
    assert "no validation/ folder" in refused(no_validation)
    differ = tmp_path / "differ"
    shutil.copytree(learnable_folder, differ)
    (differ / "validation" / "class_03").rename(differ / "validation" / "shirts")
    assert "classes differ" in refused(differ) and "only in validation/: shirts" in refused(differ)
    no_test = tmp_path / "no_t10k"
    shutil.copytree(learnable_idx, no_test)
    (no_test / "t10k-images-idx3-ubyte").unlink()
    assert "t10k-images-idx3-ubyte" in refused(no_test, "real")
    assert catalog.check_spec(RunSpec(**TINY, data="folder", data_path=str(learnable_folder), epochs=1)).classes == 10
    with pytest.raises(SpecError, match="^batch_size: the train split holds 600 examples, fewer than one batch"):
        accuracy_data.plan(RunSpec(**{**TINY, "batch_size": 1024}, data="real", epochs=1), TRAIN)


def test_the_result_shape_is_checked_and_the_status_follows_the_majority():
    run = {
        "seed": 0,
        "reached": True,
        "time_to_target_s": 1.0,
        "steps_to_target": 9,
        "epochs_to_target": 1.0,
        "train_s": 0.9,
        "eval_s": 0.1,
        "total_s": 1.0,
        "final_val_accuracy": 0.9,
        "curve": [{"wall_s": 1.0, "step": 9, "epoch": 1.0, "train_loss": 0.4, "val_loss": 0.3, "val_accuracy": 0.9}],
    }
    missed = {**run, "reached": False, "time_to_target_s": None, "steps_to_target": None, "epochs_to_target": None}
    common = dict(
        target=0.9,
        epochs=None,
        max_epochs=20,
        steps_per_epoch=9,
        eval_every_steps=9,
        dataset={"name": "fashion_mnist", "train_examples": 600, "validation_examples": 200, "classes": 10},
        load_s=0.1,
        compile_s=2.0,
    )
    assert accuracy.final_status(accuracy.summarize([run, run, missed], **common)) == "done"
    assert accuracy.final_status(accuracy.summarize([run, missed], **common)) == "not_reached"  # half is not more
    assert accuracy.final_status(accuracy.summarize([missed], **{**common, "target": None})) == "done"
    good = accuracy.summarize([run, missed], **common)
    RunResult.check({"accuracy": good})
    for bad, message in (
        ({**good, "target": 1.5}, "accuracy.target: must be a fraction"),
        ({**good, "runs": [{**run, "curve": [{"step": 1}]}]}, "accuracy.runs[0].curve[0]: "),
        ({**good, "reached": 3}, "accuracy.reached: must be at most"),
        ({k: v for k, v in good.items() if k != "dataset"}, "dataset is missing"),
    ):
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(")):
            RunResult.check({"accuracy": bad})


def test_seed_000s_five_epochs_of_100_steps_at_batch_1024_plan_and_batches(learnable_idx):
    """The article's model.fit: 5 epochs × 100 steps at batch 1024, validation after each epoch; the
    batches repeat the (here smaller) train split, each pass a fresh permutation from the seed."""
    spec = RunSpec(
        **{**TINY, "batch_size": 1024},
        data="real",
        data_path=str(learnable_idx),
        epochs=5,
        steps_per_epoch=100,
        steps_per_loop=100,
    )
    data = accuracy_data.load(spec, catalog.check_spec(spec))
    plan = accuracy_data.plan(spec, len(data.y_train))
    assert (plan.steps_per_epoch, plan.eval_every, plan.total_steps, plan.steps_per_call) == (100, 100, 500, 100)
    assert plan.evaluations() == [100, 200, 300, 400, 500]
    assert accuracy_data.plan(spec.replace(steps_per_loop=30), TRAIN).steps_per_call == 10  # gcd(30, 100, 500)
    xs, ys = next(accuracy_data.training_batches(data, 1024, 2, seed=0))
    assert xs.shape == (2, 1024, 28, 28, 1) and xs.dtype.name == "uint8" and ys.shape == (2, 1024)
    # the first 600 examples drawn are one whole pass: every training example once
    assert sorted(map(bytes, xs.reshape(2048, -1)[:TRAIN])) == sorted(map(bytes, data.x_train.reshape(TRAIN, -1)))
    other = next(accuracy_data.training_batches(data, 1024, 2, seed=1))[1]
    assert (other != ys).any()  # another seed, another order
    batches = accuracy_data.evaluation_batches(data, 1024)
    assert len(batches) == 1 and batches[0][2].sum() == VALIDATION  # padded, the padding masked out


def test_the_benchmark_table_reads_a_run_result():
    from fixtures.bench_scripts import load

    bench = load("time_to_accuracy")
    run = {
        "seed": 0,
        "reached": True,
        "time_to_target_s": 4.0,
        "steps_to_target": 9,
        "epochs_to_target": 2.0,
        "train_s": 3.0,
        "eval_s": 1.0,
        "total_s": 4.0,
        "final_val_accuracy": 0.93,
        "curve": [],
    }
    record = accuracy.summarize(
        [run, {**run, "seed": 1, "time_to_target_s": 6.0, "total_s": 6.0}],
        target=0.9,
        epochs=None,
        max_epochs=10,
        steps_per_epoch=9,
        eval_every_steps=9,
        dataset={"name": "fashion_mnist", "train_examples": 600, "validation_examples": 200, "classes": 10},
        load_s=0.1,
        compile_s=3.0,
    )
    rows = [
        bench.row(
            {
                "backend": b,
                "result": {"accuracy": record, "examples_per_sec": 500.0, "status": "done"},
                "wall_s": 20.0,
                "load": "1.00/1.00 → 1.10/1.00",
            }
        )
        for b in ("tensorflow", "jax")
    ]
    assert rows[0]["median_s"] == 5.0 and rows[0]["eval_share"] == pytest.approx(2.0 / 10.0)
    args = type(
        "Args", (), dict(target=0.9, width=16, batch_size=64, device="cpu", seeds=2, max_epochs=10, full=False)
    )()
    text = bench.table(rows, args, 600, 200)
    assert "| tensorflow | 2/2 | 5.0 s (4.0–6.0) | 2 | 20.0% | 0.930 |" in text and "1.00×" in text


def test_an_image_folder_is_read_at_the_models_image_size_and_colours(learnable_folder):
    from dashbench.workloads.datasets import load_image_folder

    spec = RunSpec(
        model="resnet50",
        batch_size=8,
        device="cpu",
        image_size=32,
        data="folder",
        data_path=str(learnable_folder),
        target_accuracy=0.5,
    )
    shapes = catalog.check_spec(spec)
    assert (shapes.image_size, shapes.channels, shapes.classes) == (32, 3, 10)  # the folder's classes
    x, y = load_image_folder(str(learnable_folder), "validation", 32, 3)
    assert x.shape == (VALIDATION, 32, 32, 3) and x.dtype.name == "uint8"
    assert (x[..., 0] == x[..., 2]).all()  # grayscale PNGs as RGB
    gray, labels = load_image_folder(str(learnable_folder), "validation", 28, 1)
    assert gray.shape == (VALIDATION, 28, 28, 1) and (labels == y).all()
    # labels are the sorted class folders' indices, as keras.utils.image_dataset_from_directory numbers them
    assert sorted(set(labels.tolist())) == list(range(10))
    first = sorted((learnable_folder / "validation" / "class_00").iterdir())[0]
    from PIL import Image

    assert any((gray[i, ..., 0] == np.asarray(Image.open(first))).all() for i in np.flatnonzero(labels == 0))
