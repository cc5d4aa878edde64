"""What can be measured: each workload's unit, description, full-size and quick shapes, default batch
sizes and accepted overrides, and the checks of a spec that need no TensorFlow.

The dashboard, the job queue, the presets and the run form read this; the engine builds the models
(dashbench.engine.workloads). Every workload trains on a *learnable* synthetic task — labels are a
fixed function of the inputs — so a working run shows a falling loss and a broken one (the seed's
non-converging LSTM) shows up.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, Optional

from dashbench.core.spec import HELD_OUT_SYNTHETIC_MODELS, MODEL_IDENTITY, MODELS, RunSpec, SpecError
from dashbench.workloads import lm_shape, lm_text, model_file
from dashbench.workloads.datasets import FASHION_CLASSES, check_fashion_mnist, check_image_folder

# Measured steps of a quick try. With the default 2 warm-up steps that is the six losses that
# bench/convergence.py finds falling at every workload's quick shapes (docs/CONVERGENCE.md); two
# steps leave the loss check one noisy comparison.
QUICK_STEPS = 4


@dataclass(frozen=True)
class Shapes:
    """The resolved shape of one run: the full-size defaults with the spec's overrides applied."""

    image_size: Optional[int] = None
    channels: Optional[int] = None
    seq_len: Optional[int] = None
    width: Optional[int] = None
    classes: int = 0
    vocab: Optional[int] = None
    layers: Optional[int] = None

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Workload:
    name: str
    unit: str  # "images" | "sequences" | "tokens"
    description: str
    defaults: dict  # full-size shapes: image_size/channels/seq_len/width/classes/vocab
    quick: dict  # shape overrides and batch size for a CPU run of seconds (quick_recipe adds the steps)
    batch_sizes: dict  # default global batch per device class
    overrides: tuple  # which of image_size, seq_len, width, layers this workload accepts
    min_image_size: int = 1
    notes: dict = field(default_factory=dict)
    # The workload's own checks of its resolved shapes, and what follows from them: values -> values.
    resolve: Optional[Callable[[dict], dict]] = None

    def shapes(self, spec: RunSpec) -> Shapes:
        values = dict(self.defaults)
        for name in ("image_size", "seq_len", "width", "layers"):
            value = getattr(spec, name)
            if value is None:
                continue
            if name not in self.overrides:
                allowed = ", ".join(self.overrides) or "none"
                raise SpecError(name, f"{self.name} has no {name} override; it accepts: {allowed}")
            values[name] = value
        if values.get("image_size") is not None and values["image_size"] < self.min_image_size:
            raise SpecError(
                "image_size",
                f"{self.name} needs images of at least {self.min_image_size} px, got {values['image_size']}",
            )
        if spec.data == "real" and values.get("image_size") != self.defaults.get("image_size"):
            raise SpecError(
                "image_size", f"real {self.name} data is {self.defaults['image_size']} px; drop the override"
            )
        return Shapes(**(self.resolve(values) if self.resolve else values))

    def quick_recipe(self) -> dict:
        """The quick try, the one recipe that `models`, the presets' --quick, the Run page's Quick try,
        the empty store's text and the README's tour give: the quick shapes, batch size and steps."""
        return {**self.quick, "steps": QUICK_STEPS}

    def quick_shapes(self) -> dict:
        return {k: v for k, v in self.quick.items() if k != "batch_size"}

    def quick_command(self) -> str:
        """The quick try as a command line: `python -m dashbench run --model … --device cpu --width 16 …`."""
        options = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in self.quick_recipe().items())
        return f"python -m dashbench run --model {self.name} --device cpu {options}"

    def describe(self) -> dict:
        return {
            "name": self.name,
            "unit": self.unit,
            "description": self.description,
            "defaults": dict(self.defaults),
            "quick": self.quick_recipe(),
            "batch_sizes": dict(self.batch_sizes),
            "overrides": list(self.overrides),
            "real_data": self.name == "fashion_mnist_cnn",
            **({"notes": dict(self.notes)} if self.notes else {}),
        }


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            name="conv2d",
            unit="images",
            description=(
                "Seed 000's tf.nn.conv2d micro-benchmark made trainable: one 5×5 convolution, stride 2, "
                "SAME, no bias, over 256×256×3 images; a global average over the output is regressed "
                "(MSE) onto the same average from a fixed random 'teacher' filter bank."
            ),
            defaults={"image_size": 256, "channels": 3, "width": 256},
            quick={"image_size": 32, "width": 16, "batch_size": 16},
            batch_sizes={"cpu": 128, "gpu": 128, "tpu": 128},
            overrides=("image_size", "width"),
            min_image_size=5,
            notes={"width": "number of filters", "flops": "80.5 GFLOP forward per 128 images at full size"},
        ),
        Workload(
            name="fashion_mnist_cnn",
            unit="images",
            description=(
                "Seed 000's Keras CNN: 3 × [BatchNorm, Conv 5×5 (64/128/256), ELU, MaxPool 2×2, Dropout 0.25], "
                "Dense 256 + ELU, Dropout 0.5, Dense 10 + softmax; Adam 1e-3. Synthetic 28×28×1 images or "
                "real Fashion-MNIST from local IDX files."
            ),
            defaults={"image_size": 28, "channels": 1, "width": 64, "classes": FASHION_CLASSES},
            quick={"width": 16, "batch_size": 64},
            batch_sizes={"cpu": 1024, "gpu": 1024, "tpu": 1024},
            overrides=("image_size", "width"),
            min_image_size=8,
            notes={"width": "filters of the first conv (the others are 2× and 4×; the dense layer is 4×)"},
        ),
        Workload(
            name="resnet50",
            unit="images",
            description="keras.applications.ResNet50, random weights, 1000 classes, synthetic ImageNet at 224 px (seed 003); momentum SGD.",
            defaults={"image_size": 224, "channels": 3, "classes": 1000},
            quick={"image_size": 32, "batch_size": 8},
            batch_sizes={"cpu": 32, "gpu": 128, "tpu": 1024},
            overrides=("image_size",),
            min_image_size=32,
        ),
        Workload(
            name="inception_v3",
            unit="images",
            description="keras.applications.InceptionV3, random weights, 1000 classes, synthetic ImageNet at 299 px (seed 003); momentum SGD.",
            defaults={"image_size": 299, "channels": 3, "classes": 1000},
            quick={"image_size": 75, "batch_size": 4},
            batch_sizes={"cpu": 32, "gpu": 128, "tpu": 1024},
            overrides=("image_size",),
            min_image_size=75,
        ),
        Workload(
            name="bilstm",
            unit="sequences",
            description=(
                "Seed 003's text classifier: Embedding(20,000 tokens, 256) → Bidirectional LSTM with 1024 "
                "hidden units per direction → Dense 2 (logits), over sequences of 200 tokens; Adam 1e-3. "
                "Synthetic labels: whether the first token is in the lower half of the vocabulary."
            ),
            defaults={"seq_len": 200, "width": 1024, "classes": 2, "vocab": 20000},
            quick={"seq_len": 32, "width": 64, "batch_size": 32},
            batch_sizes={"cpu": 64, "gpu": 128, "tpu": 1024},
            overrides=("seq_len", "width"),
            notes={"width": "LSTM hidden units per direction", "embedding": "256"},
        ),
        Workload(
            name="llama",
            unit="tokens",
            description=(
                "A Llama-style decoder LM, Llama 3.1 8B's shape at full size: 32 blocks of RMSNorm, grouped-query "
                "causal attention (32 query / 8 KV heads of 128, rotary θ 500,000) and a SwiGLU MLP of 14,336, "
                "hidden 4096, vocabulary 128,256, untied head, 8192 tokens a sequence; Adam 1e-3. Synthetic text "
                "from a fixed random bigram teacher (each token's successor one of 4), so the loss falls."
            ),
            defaults={**lm_shape.FULL, "vocab": lm_shape.MAX_VOCAB},
            quick={"seq_len": 64, "width": 64, "layers": 2, "batch_size": 8},
            batch_sizes={"cpu": 1, "gpu": 1, "tpu": 8},
            overrides=("seq_len", "width", "layers"),
            notes={
                "width": "hidden size; heads, KV heads, MLP and vocabulary follow (dashbench.workloads.lm_shape)",
                "flops": "PaLM's 6N + 12·L·H·Q·T per token (61.1 GFLOP at full size)",
                "target": f"validation log-perplexity {lm_shape.TARGET_LOG_PERPLEXITY} (MLPerf Training's)",
            },
            resolve=lm_shape.resolve,
        ),
    )
}
assert tuple(WORKLOADS) == MODELS, "the registry and spec.MODELS must list the same models"


# A user's model file: its shapes are its own (fixed by its inputs), so it takes no overrides.
USER_BATCH_SIZES = {"cpu": 32, "gpu": 128, "tpu": 1024}


def get(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        pass
    if isinstance(name, str) and (MODEL_IDENTITY.fullmatch(name) or model_file.looks_like_file(name)):
        return user_workload(name)  # a stored identity, or a file the Run page offers
    raise SpecError(
        "model",
        f"unknown model {name!r}; choose one of: {', '.join(WORKLOADS)}, or a model file: "
        "path/file.py:build or path/model.keras",
    )


def user_workload(name: str) -> Workload:
    """A user's model file as the catalog sees it (no import): its unit is examples, its shapes its own."""
    return Workload(
        name=name,
        unit="examples",
        description="Your model: inputs and a learnable target made from its input and output shapes; its "
        "compiled loss and optimizer if it has them, else Adam 1e-3 on a synthetic task.",
        defaults={},
        quick={"batch_size": 8},
        batch_sizes=dict(USER_BATCH_SIZES),
        overrides=(),
    )


def describe_all() -> list[dict]:
    return [w.describe() for w in WORKLOADS.values()]


def check_spec(spec: RunSpec) -> Shapes:
    """Every check of `spec` that needs no TensorFlow: the workload's shape overrides and, for real
    data, that the IDX files are there and sound (headers, labels; a to-accuracy run's t10k split too);
    for an image folder, its layout (train/ and validation/ with the same classes), whose class count
    the model's output takes. Callers run it before a run row is created, so bad input is an error
    line, never a junk `failed` run. Returns the resolved shapes."""
    if spec.model not in WORKLOADS:
        model_file.check_file(spec)  # there, and unchanged since the run was set up
    shapes = get(spec.model).shapes(spec)
    if spec.data == "real":
        check_fashion_mnist(spec.data_path, FASHION_CLASSES, held_out=spec.to_accuracy)
    if spec.data == "folder":
        shapes = dataclasses.replace(shapes, classes=len(check_image_folder(spec.data_path)["classes"]))
    if spec.target_loss is not None and spec.data == "synthetic" and spec.model in HELD_OUT_SYNTHETIC_MODELS:
        floor = lm_text.entropy_floor(shapes.vocab, shapes.seq_len)
        # At the floor the loss only approaches the target; a run there would train to its epoch limit.
        if spec.target_loss <= floor:
            raise SpecError(
                "target_loss",
                f"{spec.target_loss:g} is at or below the teacher's entropy floor "
                f"{floor:.4f} nats (vocabulary {shapes.vocab}): no model's validation "
                f"loss gets there; use a target above it, e.g. {max(3.3, floor + 0.5):g}",
            )
    return shapes
