"""The seed articles' experiments as preset rows: the model each names, and per device class the batch
size and steps the article used. Each workload's registry entry lists its own (dashbench.workloads.registry);
dashbench.workloads.presets turns one into a RunSpec. No framework here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

from dashbench.core.spec import RunSpec, SpecError

DEVICE_CLASSES = ("cpu", "gpu", "tpu")
LABEL_PREFIX = "preset:"
# Everything but the model and the device may be changed on the way to a RunSpec.
OVERRIDABLE = tuple(f.name for f in dataclasses.fields(RunSpec) if f.name not in ("model", "device"))


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
        return dict(self.per_device[checked_class(device_class)])


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


ROWS = (
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


def checked_class(device_class: str) -> str:
    if device_class not in DEVICE_CLASSES:
        raise SpecError(
            "device",
            f"a preset needs the device class, got {device_class!r}; choose one of: {', '.join(DEVICE_CLASSES)} "
            "(the batch size depends on it)",
        )
    return device_class
