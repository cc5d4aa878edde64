"""The seed articles' experiments as one-click presets. No TensorFlow here.

A preset fixes the model and, per device class, the batch size and steps the article used; the
user picks the device. `spec_for` turns one into a RunSpec; `quick_spec` does so with its model's
quick recipe (dashbench.workloads.catalog: shapes, batch size, steps) that lets a CPU try it in seconds.
Runs made from a preset are labelled "preset:<slug>" so the dashboard can put them next to the
preset's published rows (`references`, keys of dashbench.reference.rows()).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Optional

from dashbench.core.spec import RunSpec, SpecError

DEVICE_CLASSES = ("cpu", "gpu", "tpu")
LABEL_PREFIX = "preset:"
# Everything but the model and the device may be changed on the way to a RunSpec.
OVERRIDABLE = tuple(f.name for f in dataclasses.fields(RunSpec) if f.name not in ("model", "device"))
SHAPE_OVERRIDES = ("image_size", "seq_len", "width", "steps")


@dataclass(frozen=True)
class Preset:
    slug: str
    name: str
    model: str
    description: str
    source: str
    # device class -> RunSpec fields (batch_size, steps, warmup, steps_per_loop)
    per_device: dict
    references: tuple = ()
    # device class -> the reference rows measured on that class, for the "next to its published row" view
    reference_by_device: dict = field(default_factory=dict)
    dataset: Optional[str] = None
    dataset_size: Optional[int] = None

    def settings(self, device_class: str) -> dict:
        return dict(self.per_device[_device_class(device_class)])

    @property
    def quick(self) -> dict:
        """A CPU try in seconds: its model's quick recipe (dashbench.workloads.catalog), the one `models` prints."""
        from dashbench.workloads import catalog

        return catalog.get(self.model).quick_recipe()


def _same_everywhere(**values) -> dict:
    return {device: dict(values) for device in DEVICE_CLASSES}


# Seed 000's model.fit: 5 epochs of 100 steps on real Fashion-MNIST, validation_data = the 10,000 test
# images after each epoch (a fixed count, no target: the article compared the time of the 5 epochs).
_ARTICLE_EPOCHS = {"data": "real", "epochs": 5, "steps_per_epoch": 100}
# The spec fields that make a run train to accuracy; on synthetic data (no held-out split) a preset
# drops them and measures the throughput of the same steps.
TO_ACCURACY_FIELDS = (
    "target_accuracy",
    "target_loss",
    "max_epochs",
    "epochs",
    "steps_per_epoch",
    "eval_every",
    "seeds",
)


_PRESETS = (
    Preset(
        slug="colab-conv2d",
        name="Colab conv2d",
        model="conv2d",
        description=(
            "tf.nn.conv2d on 128 random 256×256×3 images, 256 filters 5×5, stride 2, SAME; "
            "seven timed iterations, as %timeit ran it"
        ),
        source="seed 000 (Colab free TPU article)",
        per_device=_same_everywhere(batch_size=128, steps=7, warmup=1, steps_per_loop=1),
        references=(
            "colab-conv2d-cpu",
            "colab-conv2d-k80",
            "colab-conv2d-tpu-runtime-only",
            "colab-conv2d-tpu-batch-parallel",
        ),
        reference_by_device={
            "cpu": ("colab-conv2d-cpu",),
            "gpu": ("colab-conv2d-k80",),
            "tpu": ("colab-conv2d-tpu-batch-parallel", "colab-conv2d-tpu-runtime-only"),
        },
    ),
    Preset(
        slug="colab-fashion-mnist",
        name="Colab Fashion-MNIST, 5 epochs × 100 steps, batch 1024",
        model="fashion_mnist_cnn",
        description=(
            "the Keras CNN (3 × BatchNorm/Conv 5×5/MaxPool/Dropout, Dense 256), Adam 1e-3, batch 1024, "
            "5 epochs × 100 steps = 500 steps on real Fashion-MNIST, the 10,000 test images evaluated after "
            "each epoch (--data synthetic: the same 500 steps, throughput only)"
        ),
        source="seed 000 (Colab free TPU article)",
        per_device={
            "cpu": {"batch_size": 1024, "steps": 500, "warmup": 2, "steps_per_loop": 1, **_ARTICLE_EPOCHS},
            "gpu": {"batch_size": 1024, "steps": 500, "warmup": 2, "steps_per_loop": 1, **_ARTICLE_EPOCHS},
            # One host call per epoch of 100 steps, as the TPU ran Keras' steps_per_epoch=100.
            "tpu": {"batch_size": 1024, "steps": 500, "warmup": 100, "steps_per_loop": 100, **_ARTICLE_EPOCHS},
        },
        references=("colab-fmnist-tpu", "colab-fmnist-k80", "colab-fmnist-tpu-vs-k80"),
        reference_by_device={"gpu": ("colab-fmnist-k80",), "tpu": ("colab-fmnist-tpu",)},
        dataset="Fashion-MNIST train",
        dataset_size=60_000,
    ),
    Preset(
        slug="riseml-resnet50",
        name="RiseML ResNet-50 (TPU batch 1024, GPU batch 128)",
        model="resnet50",
        description="ResNet-50 on synthetic ImageNet, images/s; TPU batch 1024, GPU batch 128",
        source="seed 003 (RiseML, Feb 2018)",
        per_device={
            # No CPU in the article: the GPU's batch, with fewer steps (a CPU step takes seconds).
            "cpu": {"batch_size": 128, "steps": 10, "warmup": 1, "steps_per_loop": 1},
            "gpu": {"batch_size": 128, "steps": 100, "warmup": 10, "steps_per_loop": 1},
            "tpu": {"batch_size": 1024, "steps": 100, "warmup": 10, "steps_per_loop": 10},
        },
        references=(
            "riseml-resnet50-tpu-vs-p100",
            "riseml-resnet50-tpu-vs-v100",
            "riseml-apr-resnet50-tpu-bf16",
            "riseml-apr-resnet50-4xv100-fp16",
        ),
        dataset="ImageNet train",
        dataset_size=1_281_167,
    ),
    Preset(
        slug="riseml-inceptionv3",
        name="RiseML InceptionV3",
        model="inception_v3",
        description="InceptionV3 on synthetic ImageNet, images/s; TPU batch 1024, GPU batch 128",
        source="seed 003 (RiseML, Feb 2018)",
        per_device={
            "cpu": {"batch_size": 128, "steps": 10, "warmup": 1, "steps_per_loop": 1},
            "gpu": {"batch_size": 128, "steps": 100, "warmup": 10, "steps_per_loop": 1},
            "tpu": {"batch_size": 1024, "steps": 100, "warmup": 10, "steps_per_loop": 10},
        },
        references=("riseml-inceptionv3-tpu-vs-p100", "riseml-inceptionv3-tpu-vs-v100"),
        dataset="ImageNet train",
        dataset_size=1_281_167,
    ),
    Preset(
        slug="riseml-bilstm",
        name="RiseML BiLSTM",
        model="bilstm",
        description=(
            "bidirectional LSTM, 1024 hidden units, text classification, examples/s; the article gave no "
            "batch size, 128 is used on every device"
        ),
        source="seed 003 (RiseML, Feb 2018)",
        per_device={
            "cpu": {"batch_size": 128, "steps": 10, "warmup": 1, "steps_per_loop": 1},
            "gpu": {"batch_size": 128, "steps": 100, "warmup": 10, "steps_per_loop": 1},
            "tpu": {"batch_size": 128, "steps": 100, "warmup": 10, "steps_per_loop": 10},
        },
        references=(
            "riseml-bilstm-tpu",
            "riseml-bilstm-p100",
            "riseml-bilstm-v100",
            "riseml-bilstm-tpu-vs-p100",
            "riseml-bilstm-tpu-vs-v100",
        ),
        reference_by_device={"gpu": ("riseml-bilstm-p100", "riseml-bilstm-v100"), "tpu": ("riseml-bilstm-tpu",)},
    ),
)

PRESETS: dict[str, Preset] = {p.slug: p for p in _PRESETS}


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", str(text).lower())


def get(name: str) -> Preset:
    """A preset by slug ("riseml-resnet50") or name ("RiseML ResNet-50 ..."), case and punctuation aside."""
    wanted = _squash(name)
    for preset in _PRESETS:
        if wanted in (_squash(preset.slug), _squash(preset.name)):
            return preset
    raise SpecError("preset", f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")


def label_for(name: str) -> str:
    return LABEL_PREFIX + get(name).slug


def _device_class(device_class: str) -> str:
    if device_class not in DEVICE_CLASSES:
        raise SpecError(
            "device",
            f"a preset needs the device class, got {device_class!r}; choose one of: {', '.join(DEVICE_CLASSES)} "
            "(the batch size depends on it)",
        )
    return device_class


def spec_for(name: str, device_class: str, check: bool = True, **overrides) -> RunSpec:
    """The RunSpec for a preset on a device class; None-valued overrides are ignored.

    Overriding `steps` alone keeps the spec valid: steps_per_loop falls to a divisor of the new
    steps and the warm-up to at most the new steps, so `steps=2` really is a short try. A preset that
    trains to accuracy (Fashion-MNIST's 5 epochs) given data synthetic measures throughput only; a
    target given drops its fixed epoch count (the two exclude each other).
    `check`: the workload's checks too (its real data's files): False only to fill a form."""
    preset = get(name)
    values = {"model": preset.model, "device": _device_class(device_class), "label": LABEL_PREFIX + preset.slug}
    values.update(preset.settings(device_class))
    overrides = {k: v for k, v in overrides.items() if v is not None}
    for key in overrides:
        if key not in OVERRIDABLE:
            raise SpecError(key, f"not a preset override; choose from: {', '.join(OVERRIDABLE)}")
    if "steps" in overrides:
        steps = overrides["steps"]
        if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
            if "steps_per_loop" not in overrides:
                values["steps_per_loop"] = math.gcd(steps, values["steps_per_loop"])
            if "warmup" not in overrides:
                values["warmup"] = min(values["warmup"], steps)
    if overrides.get("data") == "synthetic":
        for key in TO_ACCURACY_FIELDS:
            if key not in overrides:
                values.pop(key, None)
    if (
        overrides.get("target_accuracy") is not None or overrides.get("target_loss") is not None
    ) and "epochs" not in overrides:
        values.pop("epochs", None)
    values.update(overrides)
    spec = RunSpec.from_dict(values)
    if not check:
        return spec
    # The workload's own checks (which overrides it takes, its smallest image, real data's files) run
    # here, before a process or TensorFlow starts; its metadata imports no TensorFlow.
    from dashbench.workloads import catalog

    catalog.check_spec(spec)
    return spec


def quick_spec(name: str, device_class: str = "cpu", check: bool = True, **overrides) -> RunSpec:
    """The preset with its tiny CPU-try shapes (and any further overrides on top). A preset that trains
    for epochs keeps its epoch count with the quick steps in each (5 epochs × 4 steps)."""
    preset = get(name)
    quick = dict(preset.quick)
    if preset.per_device["cpu"].get("epochs") and overrides.get("data") != "synthetic":
        quick.setdefault("steps_per_epoch", quick["steps"])
    return spec_for(name, device_class, check=check, **{**quick, **overrides})


def for_run(spec_or_label) -> Optional[Preset]:
    """The preset a run was made from, through its label, or None."""
    label = (
        spec_or_label.get("label")
        if isinstance(spec_or_label, dict)
        else getattr(spec_or_label, "label", spec_or_label)
    )
    if isinstance(label, str) and label.startswith(LABEL_PREFIX):
        return PRESETS.get(label[len(LABEL_PREFIX) :])
    return None
