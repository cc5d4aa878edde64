"""To-accuracy results shaped as the engine stores them (dashbench.core.accuracy.summarize), stored in a real
store: for the views' and pages' tests (real training lands in tests/test_accuracy_real.py)."""

from dashbench.core import accuracy
from dashbench.core.spec import RunSpec

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


def fill_to_accuracy(store) -> dict:
    """A TensorFlow to-accuracy run (two seeds) and a JAX throughput run of its setup: {backend: run id}."""
    return {"tensorflow": store_run(store, "tensorflow", 640.0, block([seed_run(0, 2, 1.0, 0.5),
                                                                     seed_run(1, 3, 1.0, 0.5)])),
            "jax": store_run(store, "jax", 1280.0)}
