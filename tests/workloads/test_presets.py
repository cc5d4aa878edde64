import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.learnable_data import learnable_idx  # noqa: F401 (fixture: IDX files made here)

from dashbench.core.spec import RunSpec, SpecError
from dashbench.costs import reference
from dashbench.workloads import preset_rows, presets, registry

ARTICLE_BATCH = {
    ("riseml-resnet50", "tpu"): 1024,
    ("riseml-resnet50", "gpu"): 128,
    ("riseml-inceptionv3", "tpu"): 1024,
    ("riseml-inceptionv3", "gpu"): 128,
    ("colab-fashion-mnist", "tpu"): 1024,
    ("colab-fashion-mnist", "gpu"): 1024,
    ("colab-conv2d", "cpu"): 128,
}


def test_the_five_seed_presets():
    assert list(presets.PRESETS) == [
        "colab-conv2d",
        "colab-fashion-mnist",
        "riseml-resnet50",
        "riseml-inceptionv3",
        "riseml-bilstm",
    ]


@pytest.mark.parametrize("slug", list(presets.PRESETS))
@pytest.mark.parametrize("device", preset_rows.DEVICE_CLASSES)
def test_every_preset_builds_a_valid_spec_on_every_device_class(slug, device, learnable_idx):
    # A preset on real data reads its files' headers before a run exists (here: IDX files made here).
    data = {"data_path": str(learnable_idx)} if presets.get(slug).per_device[device].get("data") == "real" else {}
    spec = presets.spec_for(slug, device, **data)
    assert isinstance(spec, RunSpec)
    assert spec.device == device and spec.model == presets.get(slug).model
    assert spec.label == f"preset:{slug}"
    assert RunSpec.from_dict(spec.to_dict()) == spec
    if (slug, device) in ARTICLE_BATCH:
        assert spec.batch_size == ARTICLE_BATCH[(slug, device)]
    quick = presets.quick_spec(slug, device, **data)
    recipe = registry.get(spec.model).quick_recipe()  # the one quick recipe, as `models` prints it
    if spec.epochs:  # the article's epochs, each of the quick steps
        recipe = {**recipe, "steps_per_epoch": recipe["steps"]}
    assert {name: getattr(quick, name) for name in recipe} == recipe and quick.label == f"preset:{slug}"


def test_fashion_mnist_is_five_epochs_of_100_steps():
    spec = presets.spec_for("Colab Fashion-MNIST, 5 epochs × 100 steps, batch 1024", "tpu", check=False)
    assert (spec.steps, spec.steps_per_loop, spec.batch_size) == (500, 100, 1024)
    # Seed 000's model.fit: 5 epochs × 100 steps on real data, validated on the test set after each.
    assert (spec.data, spec.epochs, spec.steps_per_epoch, spec.target_accuracy) == ("real", 5, 100, None)
    assert spec.to_accuracy and spec.eval_every is None
    # Synthetic data has no held-out split: the same steps, throughput only; a target replaces the epochs.
    synthetic = presets.spec_for("colab-fashion-mnist", "cpu", data="synthetic")
    assert (synthetic.steps, synthetic.epochs, synthetic.steps_per_epoch, synthetic.to_accuracy) == (
        500,
        None,
        None,
        False,
    )
    target = presets.spec_for("colab-fashion-mnist", "cpu", check=False, target_accuracy=0.9, max_epochs=8)
    assert (target.epochs, target.target_accuracy, target.max_epochs, target.steps_per_epoch) == (None, 0.9, 8, 100)


def test_the_fashion_preset_needs_its_files_and_says_where(tmp_path):
    with pytest.raises(SpecError) as info:
        presets.quick_spec("colab-fashion-mnist", "cpu", data_path=str(tmp_path))
    assert info.value.field == "data_path" and str(tmp_path) in str(info.value)


@pytest.mark.parametrize(
    "name",
    ["riseml-resnet50", "RiseML ResNet-50 (TPU batch 1024, GPU batch 128)", "RISEML_RESNET50", "riseml resnet50"],
)
def test_found_by_slug_or_name(name):
    assert presets.get(name).slug == "riseml-resnet50"


def test_unknown_preset_and_device_name_the_field():
    with pytest.raises(SpecError) as info:
        presets.get("alexnet")
    assert info.value.field == "preset" and "riseml-bilstm" in str(info.value)
    with pytest.raises(SpecError) as info:
        presets.spec_for("riseml-bilstm", "auto")
    assert info.value.field == "device" and "cpu, gpu, tpu" in str(info.value)
    with pytest.raises(SpecError) as info:
        presets.spec_for("riseml-bilstm", "cpu", model="conv2d")
    assert info.value.field == "model"
    with pytest.raises(SpecError) as info:
        presets.spec_for("riseml-bilstm", "cpu", steps=0)
    assert info.value.field == "steps"
    # The workload's shape rules apply before anything runs.
    with pytest.raises(SpecError) as info:
        presets.spec_for("riseml-resnet50", "cpu", width=8)
    assert info.value.field == "width" and "image_size" in str(info.value)
    with pytest.raises(SpecError) as info:
        presets.spec_for("riseml-inceptionv3", "cpu", image_size=32)
    assert info.value.field == "image_size"


def test_preset_takes_every_spec_option_of_run_but_the_model():
    from dashbench.cli import build_parser
    from dashbench.cli.preset_cmd import spec_from_args

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    from dashbench.cli.spec_args import FILE_FIELDS

    # A model file's path and hash come from --model's file, never typed: no option of their own.
    fields = set(RunSpec.__dataclass_fields__) - {"model", *FILE_FIELDS}
    run = {a.dest: a.option_strings for a in commands["run"]._actions if a.dest in fields}
    preset = {a.dest: a.option_strings for a in commands["preset"]._actions}
    assert set(run) == fields and run.items() <= preset.items() and "model" not in preset
    args = parser.parse_args(
        [
            "preset",
            "riseml-bilstm",
            "--device",
            "cpu",
            "--seq-len",
            "8",
            "--width",
            "16",
            "--steps",
            "4",
            "--seed",
            "3",
            "--xla",
            "--label=--no-store",
        ]
    )
    spec = spec_from_args(args)
    assert (spec.seq_len, spec.width, spec.steps, spec.seed, spec.xla) == (8, 16, 4, 3, True)
    assert spec.label == "--no-store"
    assert spec.batch_size == presets.spec_for("riseml-bilstm", "cpu").batch_size  # not given: the preset's


def test_shape_overrides_and_a_short_steps_override_stay_valid():
    spec = presets.spec_for("riseml-resnet50", "tpu", image_size=32, steps=3, width=None)
    assert (spec.image_size, spec.steps, spec.steps_per_loop, spec.warmup) == (32, 3, 1, 3)
    assert spec.batch_size == 1024
    spec = presets.spec_for("riseml-bilstm", "cpu", seq_len=8, width=16, steps=4, steps_per_loop=2, warmup=0)
    assert (spec.seq_len, spec.width, spec.steps, spec.steps_per_loop, spec.warmup) == (8, 16, 4, 2, 0)


def test_preset_references_exist_and_runs_find_their_preset():
    keys = set(reference.rows()["key"])
    for preset in presets.PRESETS.values():
        assert preset.references and set(preset.references) <= keys, preset.slug
        for rows in preset.reference_by_device.values():
            assert set(rows) <= set(preset.references)
        assert presets.for_run(presets.spec_for(preset.slug, "cpu", check=False)) is preset
        assert presets.for_run({"label": f"preset:{preset.slug}"}) is preset
    assert presets.for_run({"label": "mine"}) is None


def test_costs_reference_and_presets_import_no_tensorflow():
    code = (
        "import sys\n"
        "from dashbench.workloads import presets\n"
        "from dashbench.costs import prices, reference\n"
        "from dashbench.cli import prices_cmd, preset_cmd\n"
        "reference.rows(); prices.catalog(); presets.spec_for('riseml-bilstm', 'cpu')\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, 'tensorflow imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60, cwd=Path(__file__).resolve().parents[2])


def test_a_preset_runs_for_real_on_tiny_shapes_and_lands_next_to_its_price(tmp_path, capsys):
    from dashbench.cli import main
    from dashbench.costs import prices, run_cost
    from dashbench.store import Store

    db = tmp_path / "results.sqlite"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dashbench",
            "preset",
            "colab-conv2d",
            "--device",
            "cpu",
            "--quick",
            "--steps",
            "2",
            "--json",
            "--db",
            str(db),
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=600,  # a guard against hangs only
        env={**os.environ, "DASHBENCH_CPU_PEAKS": '{"float32": 0.2}'},  # given by hand: no CPU probe first
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["spec"]["label"] == "preset:colab-conv2d" and result["spec"]["image_size"] == 32
    assert result["examples_per_sec"] > 0 and result["accelerator"] == "CPU"
    with Store(db) as store:
        runs = store.runs()
        assert list(runs["status"]) == ["done"] and list(runs["label"]) == ["preset:colab-conv2d"]
        # Priced per vCPU of this host until "this machine" has a price of its own.
        cpus = os.cpu_count()
        assert list(runs["host_cpus"]) == [cpus]
        assert main(["list", "--json", "--db", str(db)]) == 0
        listed_cpus = json.loads(capsys.readouterr().out)[0]["host_cpus"]
        assert listed_cpus == cpus and isinstance(listed_cpus, int)  # a count, not 2.0
        shipped = run_cost.add_cost_columns(runs, prices.catalog(store)).iloc[0]
        assert shipped["price_key"] == "gcp-n2d-per-vcpu" and shipped["usd_per_hour"] == pytest.approx(0.0312 * cpus)
        store.set_price_override(prices.store_row(prices.override_row("CPU", "hour", 0.36)))
        priced = run_cost.add_cost_columns(store.runs(), prices.catalog(store)).iloc[0]
    assert priced["usd_per_million_examples"] == pytest.approx(0.36 / (result["examples_per_sec"] * 3600) * 1e6)
