"""Your own model: the examples in examples/models/ and a saved .keras file train on TensorFlow and on
JAX through `dashbench run`, recorded under one identity (file, builder, sha256) that groups them on
Compare; every bad model file is one line naming the field, exit 2, nothing stored.

Keras picks its backend once per process and this one runs TensorFlow: the JAX runs are one process
of their own, as every run dashbench launches is."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.keras_files import save_tiny_keras

from dashbench.cli import main
from dashbench.store import Store
from dashbench.workloads import model_file

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "models"
TINY = ["--batch-size", "8", "--steps", "4", "--warmup", "1", "--device", "cpu"]
BUILDERS = ("mlp.py:build_tiny", "vit.py:build_tiny", "custom_layer.py:build_tiny")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows(db: Path) -> list[dict]:
    if not db.exists():
        return []
    with Store(db) as store:
        return store.runs().to_dict("records")


JAX_RUNS = """
import json, sys
from dashbench.cli import main
for model in sys.argv[2:]:
    code = main(["run", "--model", model, "--backend", "jax", "--db", sys.argv[1], "--json",
                 "--batch-size", "8", "--steps", "4", "--warmup", "1", "--device", "cpu"])
    print("exit", code, file=sys.stderr)
"""


def test_examples_and_a_keras_file_train_on_both_backends_under_one_identity(tmp_path, capfd):
    db = tmp_path / "runs.sqlite"
    keras_file = save_tiny_keras(tmp_path / "tiny.keras")
    models = [str(EXAMPLES / name) for name in BUILDERS] + [str(keras_file)]
    tf_results = []
    for model in models:
        assert main(["run", "--model", model, "--db", str(db), "--json", *TINY]) == 0
        tf_results.append(json.loads(capfd.readouterr().out))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    jax = subprocess.run(
        [sys.executable, "-c", JAX_RUNS, str(db), *models],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    assert jax.returncode == 0 and jax.stderr.count("exit 0") == 4, jax.stderr[-3000:]
    jax_results = [json.loads(line) for line in jax.stdout.splitlines() if line.startswith("{")]
    assert len(jax_results) == 4

    for model, tf_run, jax_run in zip(models, tf_results, jax_results):
        path = Path(model.split(":")[0])
        info = tf_run["model_info"]
        assert info["sha256"] == sha256(path) and info["file"] == path.name
        assert info["parameters"] > 0 and info["inputs"][0]["shape"]
        assert tf_run["model"] == jax_run["model"] == f"{model.split('/')[-1]}@{sha256(path)[:12]}"
        # Layer names Keras numbers per process aside, the JAX run records the same model.
        unnamed = lambda record: {**record, "outputs": [{**t, "name": None} for t in record["outputs"]]}
        assert jax_run["backend"] == "jax" and unnamed(jax_run["model_info"]) == unnamed(info)
        for run in (tf_run, jax_run):
            assert run["status"] == "done" and run["examples_per_sec"] > 0
            assert run["losses"][-1] < run["losses"][0], (model, run["backend"], run["losses"])
            # MFU rests on the layer formula where it sees every weighted layer, with the compiler's count
            # beside it; otherwise on the compiler's count of one step, labelled so.
            assert run["compiler_flops_per_example"] > 0 and run["achieved_tflops"] > 0, run
            if run["flops_source"] == "analytic":
                assert run["flops_per_example"] == run["analytic_flops_per_example"] > 0, run
            else:
                assert run["flops_source"] == "compiler" and "analytic_flops_per_example" not in run, run
                assert run["flops_per_example"] == run["compiler_flops_per_example"]
        assert tf_run["flops_source"] == jax_run["flops_source"], model  # one rule on both backends
    # Dense layers and a ViT's are the formula's: their runs' MFU does not rest on XLA's count.
    assert tf_results[0]["flops_source"] == "analytic" and tf_results[1]["flops_source"] == "analytic"
    for tf_run, jax_run in zip(tf_results, jax_results):
        # The memory guard checked XLA's analysis of the JAX run's compiled step, and the counts on TensorFlow.
        assert tf_run["memory"]["estimate_source"] == "counts" and jax_run["memory"]["estimate_source"] == "xla"
    assert tf_results[0]["model_info"]["builder"] == "build_tiny"
    assert tf_results[0]["model_info"]["outputs"] == [{"name": "logits", "shape": [4], "dtype": "float32"}]
    assert tf_results[1]["model_info"]["optimizer"] == "AdamW"  # the ViT's compiled optimizer
    assert "the model's" in tf_results[1]["model_info"]["loss"]
    assert tf_results[2]["model_info"]["inputs"][0] == {
        "name": "tokens",
        "shape": [8],
        "dtype": "int32",
        "low": 0,
        "high": 50,
    }  # from its Embedding
    assert tf_results[3]["model_info"]["source"] == "keras" and tf_results[3]["model_info"]["builder"] is None
    assert tf_results[3]["model_info"]["optimizer"] == "SGD"  # what the file was compiled with

    # list and show name the model; Compare puts each file's TensorFlow and JAX runs in one group.
    assert main(["list", "--db", str(db)]) == 0
    listed = capfd.readouterr().out
    assert all(run["model"] in listed for run in tf_results)
    assert main(["show", tf_results[1]["run_id"], "--db", str(db)]) == 0
    shown = capfd.readouterr().out
    assert f"model: vit.py:build_tiny — sha256 {sha256(EXAMPLES / 'vit.py')[:12]}…" in shown
    assert "inputs image (16, 16, 3) float32" in shown
    assert "(analytic; the compiler counts" in shown
    from dashbench.views.compare import numbers as compare

    with Store(db) as store:
        runs = store.runs()
    groups = dict(compare.workload_groups(compare.compare_frame(runs)))
    assert len(groups) == 4
    csv = compare.csv_bytes(compare.compare_table(compare.compare_frame(runs))).decode()
    assert all(run["model"] in csv for run in tf_results)
    # A bundle carries the file's identity, hash and model_info, and imports back whole.
    bundle, other = tmp_path / "runs.json", tmp_path / "other.sqlite"
    assert main(["export", "--db", str(db), "--out", str(bundle)]) == 0
    assert main(["import", str(bundle), "--db", str(other)]) == 0
    capfd.readouterr()
    with Store(other) as store:
        back = store.get_run(tf_results[2]["run_id"])
    assert back["spec"]["model_sha256"] == sha256(EXAMPLES / "custom_layer.py")
    assert back["result"].model_info == tf_results[2]["model_info"]
    for run in tf_results:
        assert sorted(groups[model_file.family(run["model"])]["backend"]) == ["jax", "tensorflow"]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BAD = {
    "raises": (
        "def build():\n    raise RuntimeError('no GPU kernels for this layer')\n",
        "error: model: bad.py:build() raised RuntimeError: no GPU kernels for this layer",
    ),
    "returns": ("def build():\n    return 42\n", "error: model: bad.py:build() returned int, not a keras.Model"),
    "int_input": (
        "import keras\ndef build():\n    i = keras.Input((4,), dtype='int32', name='ids')\n"
        "    return keras.Model(i, keras.layers.Dense(2)(keras.ops.cast(i, 'float32')))\n",
        "error: model: input 'ids' is int32 and feeds no Embedding, so its range is unknown",
    ),
    "free_dim": (
        "import keras\ndef build():\n    i = keras.Input((None, 3), name='seq')\n"
        "    return keras.Model(i, keras.layers.Dense(2)(i))\n",
        "error: model: input 'seq' has shape (None, 3): every dimension but the batch must be fixed",
    ),
    "asks": ("def build(depth):\n    pass\n", "error: model: bad.py:build() asks for 'depth'"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_builder_is_one_line_exit_2_and_nothing_stored(case, tmp_path, capfd):
    text, line = BAD[case]
    path = write(tmp_path, "bad.py", text)
    db = tmp_path / "runs.sqlite"
    assert main(["run", "--model", f"{path}:build", "--db", str(db), *TINY]) == 2
    err = capfd.readouterr().err
    assert line in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert rows(db) == []


def test_files_that_are_not_there_or_not_allowed_are_refused_before_any_import(tmp_path, capfd):
    db = tmp_path / "runs.sqlite"
    good = write(tmp_path, "m.py", "def build():\n    pass\n")
    cases = [
        (f"{tmp_path}/missing.py:build", f"error: model: no such model file: {tmp_path}/missing.py"),
        (f"{good}:make", "error: model: m.py has no function make() at its top level (functions there: build)"),
        (f"{tmp_path}/old.h5", "error: model: " + f"{tmp_path}/old.h5: .h5 files load without Keras's safe mode"),
        (f"{tmp_path}/missing.keras", f"error: model: no such model file: {tmp_path}/missing.keras"),
    ]
    for model, line in cases:
        assert main(["run", "--model", model, "--db", str(db), *TINY]) == 2
        err = capfd.readouterr().err
        assert err.startswith(line) and len(err.strip().splitlines()) == 1, err
    assert rows(db) == []


def test_a_builder_that_hangs_at_import_is_stopped_at_the_time_limit(tmp_path, capfd, monkeypatch):
    path = write(tmp_path, "slow.py", "import time\ntime.sleep(600)\ndef build():\n    pass\n")
    monkeypatch.setenv("DASHBENCH_MODEL_IMPORT_TIMEOUT_S", "1")
    db = tmp_path / "runs.sqlite"
    assert main(["run", "--model", f"{path}:build", "--db", str(db), *TINY]) == 2
    err = capfd.readouterr().err
    assert (
        "error: model: slow.py did not finish importing within 1 s (DASHBENCH_MODEL_IMPORT_TIMEOUT_S): stopped" in err
    )
    assert rows(db) == []


def test_a_lambda_keras_file_is_refused_by_safe_mode(tmp_path, capfd):
    path = save_tiny_keras(tmp_path / "lam.keras", lambda_layer=True)
    db = tmp_path / "runs.sqlite"
    assert main(["run", "--model", str(path), "--db", str(db), *TINY]) == 2
    err = capfd.readouterr().err
    assert "error: model: lam.keras holds a Lambda layer (Python code), which safe mode refuses" in err
    assert len(err.strip().splitlines()) == 1 and rows(db) == []


# Saved in a process of its own, which defines the two layers (one registered there): the run's process
# defines neither, as a .keras file brings no code.
SAVE_CUSTOM = """
import sys
import keras
from keras import layers


class Twice(layers.Layer):
    def call(self, x):
        return x * 2.0


@keras.saving.register_keras_serializable(package="mine")
class Shift(layers.Layer):
    def call(self, x):
        return x + 1.0


x = keras.Input((4,), name="x")
keras.Model(x, layers.Dense(2)(Shift()(Twice()(x)))).save(sys.argv[1])
"""


def test_a_keras_file_with_custom_layers_names_them_and_the_fix(tmp_path, capfd):
    path = tmp_path / "custom.keras"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERAS_BACKEND": "jax"}
    subprocess.run(
        [sys.executable, "-c", SAVE_CUSTOM, str(path)], check=True, env=env, timeout=300, capture_output=True
    )
    line = (
        "error: model: custom.keras uses custom classes Twice, mine>Shift, which no code here defines (a .keras "
        "file holds no code): give a builder file.py:build that defines them (registered with "
        "keras.saving.register_keras_serializable) and returns the model"
    )
    db = tmp_path / "runs.sqlite"
    assert main(["run", "--model", str(path), "--db", str(db), *TINY]) == 2
    err = capfd.readouterr().err
    assert err.strip() == line, err
    jax = subprocess.run(
        [sys.executable, "-m", "dashbench", "run", "--model", str(path), "--backend", "jax", "--db", str(db), *TINY],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert jax.returncode == 2 and jax.stderr.strip() == line, jax.stderr[-2000:]
    assert rows(db) == []


def test_a_file_changed_between_queueing_and_running_is_refused(tmp_path, capfd):
    from dashbench.core.spec import RunSpec
    from dashbench.workloads import model_file

    path = write(tmp_path, "m.py", (EXAMPLES / "mlp.py").read_text())
    spec = RunSpec(batch_size=8, steps=4, warmup=1, device="cpu", **model_file.reference(f"{path}:build_tiny"))
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        run_id = store.create_run(spec, status="queued")
    path.write_text(path.read_text() + "\n# edited\n")
    assert main(["run", "--run-id", run_id, "--db", str(db)]) == 2
    err = capfd.readouterr().err
    assert "error: model: m.py changed since this run was set up" in err and "refused" in err
    with Store(db) as store:
        row = store.get_run(run_id)
    assert row["status"] == "failed" and "changed since this run was set up" in row["error"]


def test_a_copy_that_arrives_changed_is_refused_where_it_arrives(tmp_path, capfd, monkeypatch):
    """A cluster node reads the copy its Ray job brought (DASHBENCH_MODEL_FILE, in the job's working
    directory) and checks it against the hash the run was queued with."""
    from dashbench.core.spec import RunSpec
    from dashbench.workloads import model_file

    spec = RunSpec(batch_size=8, device="cpu", **model_file.reference(f"{EXAMPLES / 'mlp.py'}:build_tiny"))
    db = tmp_path / "runs.sqlite"
    with Store(db) as store:
        run_id = store.create_run(spec, status="queued")
    arrived = tmp_path / "job"
    arrived.mkdir()
    (arrived / "mlp.py").write_text((EXAMPLES / "mlp.py").read_text().replace("CLASSES = 10", "CLASSES = 11"))
    monkeypatch.chdir(arrived)
    monkeypatch.setenv(model_file.ARRIVED_ENV, "mlp.py")
    assert model_file.local_path(spec) == arrived / "mlp.py"
    assert main(["run", "--run-id", run_id, "--db", str(db)]) == 2
    assert "error: model: mlp.py changed since this run was set up" in capfd.readouterr().err


def test_the_largest_batch_search_names_the_file_again():
    from dashbench.core.spec import RunSpec
    from dashbench.jobs import max_batch
    from dashbench.workloads import model_file

    spec = RunSpec(batch_size=8, device="cpu", steps=4, **model_file.reference(f"{EXAMPLES / 'vit.py'}:build_tiny"))
    argv = max_batch.argv_for(spec)
    assert argv[:4] == ["--model", f"{EXAMPLES / 'vit.py'}:build_tiny", "--start-batch", "8"]
    assert "--model-path" not in argv and "--model-sha256" not in argv
    # With the hash it had when the search was asked for: the sweep refuses a file changed since.
    assert argv[argv.index("--expect-sha256") + 1] == sha256(EXAMPLES / "vit.py")


def test_a_sweep_queues_each_point_with_the_files_hash(tmp_path, capfd):
    db = tmp_path / "runs.sqlite"
    model = f"{EXAMPLES / 'mlp.py'}:build_tiny"
    assert (
        main(
            [
                "sweep",
                "--model",
                model,
                "--device",
                "cpu",
                "--batch-sizes",
                "8,16",
                "--steps",
                "2",
                "--warmup",
                "0",
                "--db",
                str(db),
            ]
        )
        == 0
    )
    with Store(db) as store:
        runs = [store.get_run(r) for r in store.runs()["run_id"]]
    assert sorted(r["spec"]["batch_size"] for r in runs) == [8, 16]
    assert {r["status"] for r in runs} == {"done"}
    assert {r["spec"]["model_sha256"] for r in runs} == {sha256(EXAMPLES / "mlp.py")}
    assert {r["result"].model_info["parameters"] for r in runs} == {676}


def test_a_builder_trains_to_accuracy_on_an_image_folder(tmp_path, capfd):
    """Real data through the image-folder path: the ViT's builder takes the folder's class count and
    its images are read at the size and colours of its one input."""
    from fixtures.learnable_data import write_learnable_folder

    folder = write_learnable_folder(tmp_path / "images", train=128, validation=64, side=16, rgb=True, classes=4)
    db = tmp_path / "runs.sqlite"
    assert (
        main(
            [
                "run",
                "--model",
                f"{EXAMPLES / 'vit.py'}:build_tiny",
                "--batch-size",
                "16",
                "--device",
                "cpu",
                "--data",
                "folder",
                "--data-path",
                str(folder),
                "--epochs",
                "2",
                "--db",
                str(db),
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capfd.readouterr().out)
    record = result["accuracy"]
    assert result["status"] == "done" and record["dataset"] == {
        "name": "folder",
        "train_examples": 128,
        "validation_examples": 64,
        "classes": 4,
    }
    assert result["model_info"]["outputs"][0]["shape"] == [4] and len(record["runs"][0]["curve"]) == 2
    assert result["flops_source"] == "analytic" and result["compiler_flops_per_example"] > 0, result
    # A model whose input is no image is named, not trained.
    assert (
        main(
            [
                "run",
                "--model",
                f"{EXAMPLES / 'mlp.py'}:build_tiny",
                "--batch-size",
                "16",
                "--device",
                "cpu",
                "--data",
                "folder",
                "--data-path",
                str(folder),
                "--epochs",
                "1",
                "--db",
                str(db),
            ]
        )
        == 2
    )
    assert "error: model: mlp.py:build_tiny: an image folder feeds a model of one image input" in capfd.readouterr().err


def test_the_memory_guard_counts_a_model_files_parameters_and_activations(tmp_path, capfd, monkeypatch):
    from dashbench.workloads import memory_counts

    monkeypatch.setenv("DASHBENCH_MEMORY_BUDGET_GB", "4")
    db = tmp_path / "runs.sqlite"
    model = f"{EXAMPLES / 'mlp.py'}:build"
    assert main(["run", "--model", model, "--batch-size", "2000000", "--device", "cpu", "--db", str(db)]) == 2
    err = capfd.readouterr().err
    assert "error: batch_size: mlp.py:build@" in err and "at batch 2000000 needs about" in err, err
    assert rows(db) == []
    facts = memory_counts.USER_MODEL_FACTS[
        next(k for k in memory_counts.USER_MODEL_FACTS if k.startswith("mlp.py:build@"))
    ]
    assert facts["parameters"] == 256 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10
    assert facts["slots"] == 2 and facts["inputs"] == 256 and facts["activations"] >= 256 + 512 + 512 + 10


RICH = """
import keras
import numpy as np

def build(batch_size):
    ids = keras.Input(batch_shape=(batch_size, 5), dtype="int32", name="ids")
    x = keras.layers.Dense(8, activation="relu")(keras.ops.cast(ids, "float32") / 7.0)
    model = keras.Model(ids, keras.layers.Dense(1)(x))
    return {"model": model, "inputs": {"ids": {"low": 0, "high": 7}},
            "labels": lambda x: (x.sum(axis=1, keepdims=True) / 35.0).astype(np.float32), "loss": "mse"}
"""


def test_a_richer_builder_says_its_batch_size_input_range_labels_and_loss(tmp_path, capfd):
    path = write(tmp_path, "rich.py", RICH)
    assert main(["run", "--model", f"{path}:build", "--no-store", "--json", *TINY]) == 0
    result = json.loads(capfd.readouterr().out)
    info = result["model_info"]
    assert result["status"] == "done" and info["inputs"] == [
        {"name": "ids", "shape": [5], "dtype": "int32", "low": 0, "high": 7}
    ]
    assert info["task"] == "synthetic: the builder's labels" and info["loss"].startswith("mean_squared_error")
    assert result["losses"][-1] < result["losses"][0]
