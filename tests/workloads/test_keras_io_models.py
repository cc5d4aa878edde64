"""Models as keras.io writes them (examples/models/: a text transformer and a mini GPT whose
Embeddings sit inside custom layers, a subclassed model, ConvMixer, an image + tabular model) train
unchanged on TensorFlow and on JAX: only their size constants are made tiny here. A subclassed model
whose builder names no input shapes is one line saying what to add, exit 2, nothing stored."""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dashbench.cli import main
from dashbench.store import Store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "models"
TINY = ["--batch-size", "8", "--steps", "2", "--warmup", "1", "--device", "cpu"]
# Each file's module-level sizes, made tiny; the rest of the file is keras.io's.
SIZES = {
    "text_transformer.py": {"vocab_size": 60, "maxlen": 8, "embed_dim": 8, "ff_dim": 8},
    "mini_gpt.py": {"vocab_size": 40, "maxlen": 8, "embed_dim": 8, "feed_forward_dim": 8},
    "image_and_tabular.py": {"image_size": 12, "num_features": 4},
}
# The mini GPT with the builder's own next-token labels and its input's range, as a user adds them.
WITH_LABELS = """

def build_with_labels():
    import numpy as np

    model = create_model()
    return {
        "model": model,
        "inputs": {model.layers[0].name: {"high": vocab_size}},
        "labels": lambda x: np.roll(x, -1, axis=1),
    }
"""
# A subclassed model built with model.build(shape): the shape it was built for is its input.
BUILT = """

def build_built():
    model = MyModel()
    model.build((None, 12))
    return model
"""
MODELS = (
    "text_transformer.py:build",
    "mini_gpt.py:create_model",
    "mini_gpt.py:build_with_labels",
    "subclassed.py:build",
    "subclassed.py:build_built",
    "convmixer.py:get_conv_mixer_256_8",
    "image_and_tabular.py:build",
)


def tiny_copies(folder: Path) -> Path:
    for name, sizes in SIZES.items():
        text = (EXAMPLES / name).read_text()
        for constant, value in sizes.items():
            text, count = re.subn(rf"^{constant} = \d+", f"{constant} = {value}", text, flags=re.M)
            assert count == 1, (name, constant)
        (folder / name).write_text(text + (WITH_LABELS if name == "mini_gpt.py" else ""))
    convmixer = (EXAMPLES / "convmixer.py").read_text()
    sizes = "image_size=32, filters=256, depth=8"
    assert sizes in convmixer
    (folder / "convmixer.py").write_text(convmixer.replace(sizes, "image_size=8, filters=8, depth=1"))
    subclassed = (EXAMPLES / "subclassed.py").read_text()
    assert "(784,)" in subclassed
    (folder / "subclassed.py").write_text(subclassed.replace("(784,)", "(12,)") + BUILT)
    return folder


JAX_RUNS = """
import sys
from dashbench.cli import main
for model in sys.argv[2:]:
    code = main(["run", "--model", model, "--backend", "jax", "--db", sys.argv[1], "--json", *%r])
    print("exit", code, model, file=sys.stderr)
""" % (TINY,)


def test_keras_io_models_train_unchanged_on_both_backends(tmp_path, capfd):
    folder = tiny_copies(tmp_path)
    db = tmp_path / "runs.sqlite"
    models = [str(folder / name) for name in MODELS]
    tf_runs = []
    for model in models:
        assert main(["run", "--model", model, "--db", str(db), "--json", *TINY]) == 0, capfd.readouterr().err
        tf_runs.append(json.loads(capfd.readouterr().out))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    jax = subprocess.run(
        [sys.executable, "-c", JAX_RUNS, str(db), *models], capture_output=True, text=True, env=env, timeout=900
    )
    assert jax.returncode == 0 and jax.stderr.count("exit 0") == len(models), jax.stderr[-3000:]
    jax_runs = [json.loads(line) for line in jax.stdout.splitlines() if line.startswith("{")]
    for name, tf_run, jax_run in zip(MODELS, tf_runs, jax_runs):
        assert tf_run["model"] == jax_run["model"]
        for run in (tf_run, jax_run):
            assert run["status"] == "done" and run["examples_per_sec"] > 0, (name, run["backend"])
            assert all(math.isfinite(loss) for loss in run["losses"]), (name, run["backend"], run["losses"])
        # Layer names Keras numbers per process aside, the JAX run makes the same inputs and task.
        unnamed = lambda run: [{**t, "name": None} for t in run["model_info"]["inputs"]]  # noqa: E731
        assert unnamed(jax_run) == unnamed(tf_run) and jax_run["model_info"]["task"] == tf_run["model_info"]["task"]
    info = {name: run["model_info"] for name, run in zip(MODELS, tf_runs)}
    # keras.io's float Input feeds the token Embedding inside TokenAndPositionEmbedding (not the position
    # one beside it, which reads a range): token ids below its vocabulary, never a float from a normal.
    text = info["text_transformer.py:build"]["inputs"][0]
    assert text["dtype"] == "float32" and (text["low"], text["high"]) == (0, 60), text
    gpt = info["mini_gpt.py:create_model"]
    assert gpt["task"].startswith("synthetic: next-token prediction") and gpt["inputs"][0]["high"] == 40, gpt
    assert "sparse_categorical_crossentropy (the model's)" == gpt["loss"], gpt
    assert [o["shape"] for o in gpt["outputs"]] == [[8, 40], [8, 8]]  # the logits and the features
    labelled = info["mini_gpt.py:build_with_labels"]
    assert labelled["task"] == "synthetic: the builder's labels" and labelled["inputs"][0]["high"] == 40
    assert info["subclassed.py:build"]["inputs"] == [{"name": "digits", "shape": [12], "dtype": "float32"}]
    assert info["subclassed.py:build_built"]["inputs"][0]["shape"] == [12]
    assert [i["name"] for i in info["image_and_tabular.py:build"]["inputs"]] == ["image", "tabular"]
    # Next-token text from the teacher is learnable: the mini GPT's loss falls on both backends.
    at = MODELS.index("mini_gpt.py:create_model")
    gpt_runs = [tf_runs[at], jax_runs[at]]
    assert all(r["losses"][-1] < r["losses"][0] for r in gpt_runs), [r["losses"] for r in gpt_runs]


def test_a_subclassed_model_without_input_shapes_says_what_to_add(tmp_path, capfd):
    path = tmp_path / "plain.py"
    path.write_text((EXAMPLES / "subclassed.py").read_text() + "\n\ndef build_plain():\n    return MyModel()\n")
    db = tmp_path / "runs.sqlite"
    assert main(["run", "--model", f"{path}:build_plain", "--db", str(db), *TINY]) == 2
    err = capfd.readouterr().err
    assert err.strip() == (
        "error: model: plain.py:build_plain() returned MyModel, which has no symbolic inputs (a subclassed "
        "model): return {'model': m, 'inputs': {'x': {'shape': (784,), 'dtype': 'float32'}}}, each input's "
        "shape without the batch and its dtype, in the order call() takes them"
    ), err
    if db.exists():
        with Store(db) as store:
            assert store.runs().empty


@pytest.mark.parametrize(
    "inputs, words",
    [
        ("{'digits': {'shape': (0,)}}", "inputs['digits']['shape'] must be whole numbers > 0"),
        ("{'digits': {'size': 3}}", "inputs['digits'] has 'size'; its keys are shape, dtype, low, high"),
    ],
)
def test_bad_input_shapes_are_named(tmp_path, capfd, inputs, words):
    path = tmp_path / "bad.py"
    path.write_text(
        (EXAMPLES / "subclassed.py").read_text() + f"\n\ndef build_bad():\n    return {{'model': MyModel(), "
        f"'inputs': {inputs}}}\n"
    )
    assert main(["run", "--model", f"{path}:build_bad", "--db", str(tmp_path / "r.sqlite"), *TINY]) == 2
    err = capfd.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1, err


COUNTED = """
import os
import keras

def build():
    with open(os.environ["BUILDS_FILE"], "a") as handle:
        handle.write("built\\n")
    x = keras.Input((4,), name="x")
    return keras.Model(x, keras.layers.Dense(2)(x))
"""


def test_a_model_files_check_runs_its_builder_once_for_real(tmp_path, monkeypatch):
    """Before a run: once without weights (the memory check's counts), once for real (the model's
    inputs and task, and the counts the guard keeps); the counts are never a third build."""
    from dashbench.core.spec import RunSpec
    from dashbench.engine.workloads import user
    from dashbench.workloads import memory_counts, model_file

    path = tmp_path / "counted.py"
    path.write_text(COUNTED)
    builds = tmp_path / "builds"
    monkeypatch.setenv("BUILDS_FILE", str(builds))
    spec = RunSpec(batch_size=8, steps=2, warmup=1, device="cpu", **model_file.reference(f"{path}:build"))
    checked = []
    user.prepare(spec, checked.append)
    assert checked == [spec] and builds.read_text().splitlines() == ["built", "built"]
    facts = next(v for k, v in memory_counts.USER_MODEL_FACTS.items() if k.startswith("counted.py:build@"))
    assert facts["parameters"] == 10 and facts["inputs"] == 4, facts
