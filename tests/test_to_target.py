"""Time and cost to target, and its prediction on other devices (views.to_target), on results shaped as
the engine stores them (dashbench.accuracy.summarize) in a real SQLite store. Real training checks the
prediction in tests/test_accuracy_real.py."""

import pytest

from dashbench import accuracy
from dashbench.spec import RunSpec
from dashbench.store import Store
from dashbench.views import accuracy_view, to_target

SETUP = dict(model="fashion_mnist_cnn", batch_size=64, image_size=28, width=16)


def seed_run(seed, epochs_to_target, seconds_per_epoch, eval_s_each, evals=4, reached=True):
    """A seed's stored run: it reaches the target at `epochs_to_target` (evaluating once an epoch)."""
    curve, wall = [], 0.0
    for epoch in range(1, evals + 1):
        wall += seconds_per_epoch + eval_s_each
        curve.append({"wall_s": wall, "step": epoch * 10, "epoch": float(epoch), "train_loss": 1.0 / epoch,
                      "val_loss": 1.1 / epoch, "val_accuracy": min(0.99, 0.5 + 0.15 * epoch)})
    hit = reached and epochs_to_target <= evals
    return {"seed": seed, "reached": hit,
            "time_to_target_s": epochs_to_target * (seconds_per_epoch + eval_s_each) if hit else None,
            "steps_to_target": epochs_to_target * 10 if hit else None,
            "epochs_to_target": float(epochs_to_target) if hit else None,
            "train_s": evals * seconds_per_epoch, "eval_s": evals * eval_s_each,
            "total_s": wall, "final_val_accuracy": curve[-1]["val_accuracy"], "curve": curve}


def block(runs, target=0.9):
    return accuracy.summarize(runs, target=target, epochs=None, max_epochs=20, steps_per_epoch=10,
                              eval_every_steps=10, dataset={"name": "fashion_mnist", "train_examples": 640,
                                                            "validation_examples": 200, "classes": 10},
                              load_s=0.1, compile_s=1.0)


def store_run(store, backend, eps, acc=None, replicas=1, seed=0):
    data = "real" if acc else "synthetic"
    spec = RunSpec(**SETUP, device="cpu", backend=backend, data=data, data_path="/x" if acc else None, seed=seed,
                   **({"target_accuracy": 0.9} if acc else {}), replicas=replicas)
    run_id = store.create_run(spec, status="running")
    result = {"model": SETUP["model"], "device": "cpu", "accelerator": "CPU", "accelerator_count": 1,
              "replicas": replicas, "global_batch_size": 64, "precision": "float32", "data": data,
              "examples_per_sec": eps, "losses": [2.0, 1.5], "steps_per_loop": 1, "spec": spec.to_dict(),
              **({"backend": backend} if backend != "tensorflow" else {}), **({"accuracy": acc} if acc else {})}
    store.finish_run(run_id, "done", result=result)
    return run_id


def test_prediction_is_epochs_times_examples_over_throughput_plus_scaled_evaluation(tmp_path):
    # On device X (TensorFlow, 640 examples/s): 2 and 3 epochs of 640 examples (1 s each), 0.5 s an evaluation.
    source = block([seed_run(0, 2, 1.0, 0.5), seed_run(1, 3, 1.0, 0.5)])
    with Store(tmp_path / "runs.sqlite") as store:
        x = store_run(store, "tensorflow", 640.0, source)
        store_run(store, "jax", 1280.0)  # device Y: a throughput run only, twice as fast
        chosen, found, throughput = to_target.gather(store, [x])
    rows = to_target.target_rows(chosen, found, throughput, lambda row: 3.6)
    measured = [r for r in rows if r["kind"] == "measured"]
    (predicted,) = [r for r in rows if r["kind"] == "predicted"]
    assert measured[0]["time_to_target_s"] == pytest.approx(3.75)  # median of 3.0 and 4.5
    assert measured[0]["usd_to_target"] == pytest.approx(3.75 * 3.6 / 3600)
    assert predicted["device"] == "CPU · jax" and predicted["source"] == "predicted from the epochs measured on CPU · tensorflow"
    # seed 0: 2 epochs × 640 / 1280 + 2 of 4 evaluations (1 s) × 640/1280 = 1.5; seed 1: 1.5 + 0.75 = 2.25
    assert (predicted["time_min_s"], predicted["time_max_s"]) == pytest.approx((1.5, 2.25))
    assert predicted["time_to_target_s"] == pytest.approx(1.875) and predicted["error"] is None


def test_prediction_error_against_a_measured_run_on_that_device(tmp_path):
    with Store(tmp_path / "runs.sqlite") as store:
        x = store_run(store, "tensorflow", 640.0, block([seed_run(0, 2, 1.0, 0.5)]))
        y = store_run(store, "jax", 1280.0, block([seed_run(0, 2, 0.6, 0.25)]))  # measured there: 1.7 s
        chosen, found, throughput = to_target.gather(store, [x])
    rows = to_target.target_rows(chosen, found, throughput, lambda row: None)
    (predicted,) = [r for r in rows if r["kind"] == "predicted"]
    assert predicted["time_to_target_s"] == pytest.approx(1.5)  # 2 × 640/1280 + 2 × 0.5 s of evaluation × 0.5
    assert predicted["error"] == pytest.approx((1.5 - 1.7) / 1.7) and predicted["measured_run_id"] == y
    assert {r["run_id"] for r in rows if r["kind"] == "measured"} == {x, y}
    assert predicted["usd_to_target"] is None  # no price: no cost, the time still shown


def test_a_different_target_or_setup_is_not_compared(tmp_path):
    with Store(tmp_path / "runs.sqlite") as store:
        x = store_run(store, "tensorflow", 640.0, block([seed_run(0, 2, 1.0, 0.5)]))
        store_run(store, "jax", 1280.0, block([seed_run(0, 2, 0.5, 0.25)], target=0.8))
        spec = RunSpec(model="fashion_mnist_cnn", batch_size=32, image_size=28, width=16, device="cpu", replicas=2)
        other = store.create_run(spec, status="running")  # another global batch: not this setup's throughput
        store.finish_run(other, "done", result={"model": "fashion_mnist_cnn", "accelerator": "CPU",
                                                "accelerator_count": 1, "replicas": 2, "global_batch_size": 32,
                                                "examples_per_sec": 9000.0, "spec": spec.to_dict()})
        chosen, found, throughput = to_target.gather(store, [x])
    rows = to_target.target_rows(chosen, found, throughput, lambda row: None)
    (predicted,) = [r for r in rows if r["kind"] == "predicted"]
    assert predicted["device"] == "CPU · jax" and predicted["error"] is None  # its measured run aimed at 0.8


def test_compare_section_and_table(tmp_path):
    with Store(tmp_path / "runs.sqlite") as store:
        x = store_run(store, "tensorflow", 640.0, block([seed_run(0, 2, 1.0, 0.5), seed_run(1, 9, 1.0, 0.5)]))
        store_run(store, "jax", 1280.0)
        section = accuracy_view.target_section(store, [x], None)
    table = section.table
    assert table["seeds reached"].tolist() == ["1/2", "1/2"]
    assert table["how"].tolist() == ["measured", "predicted from the epochs measured on CPU · tensorflow"]
    time_bars = section.time.to_dict()["data"]
    assert [t["name"] for t in time_bars] == ["measured", "predicted from another device's epochs"]
    assert "set a price" in section.against_cost.to_dict()["layout"]["annotations"][0]["text"]
    assert len(section.against_time.to_dict()["data"]) == 2  # a line per seed
