"""One home per workload: what each built-in is, in one entry, and a user's model file given the same
interface. No framework imported here.

An entry holds the workload's name, what a RunSpec's checks know of it (core.spec.BUILTINS, its
capabilities), its unit and description, its full-size and quick shapes and which of them a spec may
override, its default batch sizes, how its FLOPs and its memory are counted, and how its cost profile
is made. Its presets are the seed articles' experiments that name it (dashbench.workloads.presets
reads them from here). The Keras side of a built-in (builder, batch, loss, optimizer) is the engine's
(dashbench.engine.workloads), which keeps one object per name listed here.

As torchtitan's train specs: `register` refuses a name twice, `get` refuses an unknown one (listing
the known ones), `names` lists them in order. Every workload trains on a *learnable* synthetic task
(labels are a fixed function of the inputs), so a working run shows a falling loss and a broken one
(the seed's non-converging LSTM) shows up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from dashbench.core.spec import BUILTINS, MODEL_IDENTITY, Capabilities, RunSpec, SpecError
from dashbench.workloads import lm_shape, memory_counts, model_file, preset_rows
from dashbench.workloads.datasets import FASHION_CLASSES

# Measured steps of a quick try. With the default 2 warm-up steps that is the six losses that
# bench/convergence.py finds falling at every workload's quick shapes (docs/CONVERGENCE.md); two
# steps leave the loss check one noisy comparison.
QUICK_STEPS = 4
# A user's model file: its shapes are its own (fixed by its inputs), so it takes no overrides.
USER_BATCH_SIZES = {"cpu": 32, "gpu": 128, "tpu": 1024}
# Where a workload's FLOPs come from (RunResult.flops_source tells which a run used): a formula of its
# shapes (the entry's `flops`), the layer formula over the built model (dashbench.engine.workloads.flops),
# or the compiler's count alone.
FLOPS_BY = ("formula", "layers", "compiler")


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
    unit: str  # "images" | "sequences" | "tokens" | "examples" (a model file)
    description: str
    defaults: dict  # full-size shapes: image_size/channels/seq_len/width/classes/vocab
    quick: dict  # shape overrides and batch size for a CPU run of seconds (quick_recipe adds the steps)
    batch_sizes: dict  # default global batch per device class
    overrides: tuple  # which of image_size, seq_len, width, layers this workload accepts
    min_image_size: int = 1
    notes: dict = field(default_factory=dict)
    # The workload's own checks of its resolved shapes, and what follows from them: values -> values.
    resolve: Optional[Callable[[dict], dict]] = None
    # FLOPs per example by formula of the shapes ({forward, training, formula}), None where the layer
    # formula counts the built model; flops_by says which (FLOPS_BY).
    flops: Optional[Callable[[Shapes], dict]] = None
    flops_by: str = "layers"
    # Memory (dashbench.workloads.memory_estimate): shapes -> (parameters, activation values and input
    # values per example); None where not known in this process (a model file not built here).
    memory: Optional[Callable[[Shapes], tuple]] = None
    optimizer_slots: int = 2  # Adam; momentum SGD keeps 1
    # What the framework holds beyond the weights and the batch: (shapes, backend) -> bytes.
    graph_bytes: Optional[Callable[[Shapes, str], float]] = None
    # JAX on the CPU keeps more per example than the backward factor says (docs/MEMORY.md); None: the default.
    xla_cpu_backward: Optional[float] = None
    # Its cost profile (dashbench.engine.profile): a stack of identical blocks is compiled at one and
    # at two layers and the difference extrapolated to its layer count; else the whole step.
    profile_by_layers: bool = False
    is_file: bool = False  # a user's model file, never imported outside the run's own process

    @property
    def capabilities(self) -> Capabilities:
        """What a RunSpec's checks know of it (core.spec.BUILTINS); a model file has none of them."""
        return BUILTINS.get(self.name, Capabilities())

    @property
    def presets(self) -> tuple:
        """The seed articles' experiments made with this workload (dashbench.workloads.presets)."""
        return tuple(p for p in preset_rows.ROWS if p.model == self.name)

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
            "real_data": self.capabilities.real_data,
            **({"notes": dict(self.notes)} if self.notes else {}),
        }


_REGISTRY: dict[str, Workload] = {}


def register(workload: Workload) -> None:
    """Add a built-in workload; its name must be new, and one core.spec.BUILTINS declares."""
    if workload.name in _REGISTRY:
        raise ValueError(f"workload {workload.name!r} is already registered")
    if workload.name not in BUILTINS:
        raise ValueError(f"workload {workload.name!r} is not a built-in of core.spec.BUILTINS")
    if workload.flops_by not in FLOPS_BY or (workload.flops is None) == (workload.flops_by == "formula"):
        raise ValueError(f"workload {workload.name!r}: flops_by {workload.flops_by!r} does not match its flops")
    _REGISTRY[workload.name] = workload


def names() -> tuple[str, ...]:
    """The built-ins, in the order every list shows them."""
    return tuple(_REGISTRY)


def builtins() -> tuple[Workload, ...]:
    return tuple(_REGISTRY.values())


def builtin(name) -> Optional[Workload]:
    """The built-in of that name, or None (a model file, or any other value)."""
    return _REGISTRY.get(name) if isinstance(name, str) else None


def get(name: str) -> Workload:
    """A built-in by name, or a model file by its stored identity or by the reference the Run page offers."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    if isinstance(name, str) and (MODEL_IDENTITY.fullmatch(name) or model_file.looks_like_file(name)):
        return for_file(name)
    raise SpecError(
        "model",
        f"unknown model {name!r}; choose one of: {', '.join(_REGISTRY)}, or a model file: "
        "path/file.py:build or path/model.keras",
    )


def for_file(name: str) -> Workload:
    """A user's model file as every caller sees it (no import): its unit is examples, its shapes its own,
    its FLOPs the compiler's (and the layer formula's where it covers the model, counted in the run's
    process), its memory the counts that process made of it (unknown elsewhere)."""
    facts = memory_counts.USER_MODEL_FACTS.get(name)
    return Workload(
        name=name,
        unit="examples",
        description="Your model: inputs and a learnable target made from its input and output shapes; its "
        "compiled loss and optimizer if it has them, else Adam 1e-3 on a synthetic task.",
        defaults={},
        quick={"batch_size": 8},
        batch_sizes=dict(USER_BATCH_SIZES),
        overrides=(),
        flops_by="compiler",
        memory=(lambda _shapes: memory_counts.of_file(name)) if facts else None,
        optimizer_slots=facts["slots"] if facts else 2,
        is_file=True,
    )


def _lm_flops(shapes: Shapes) -> dict:
    """PaLM's count per token (lm_shape.LMDims.palm_flops), the convention MaxText reports MFU by."""
    dims = lm_shape.dims(shapes.width, shapes.layers, shapes.seq_len)
    return {**dims.palm_flops(), "formula": "PaLM 6N + 12·L·H·Q·T per token"}


for _workload in (
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
        memory=memory_counts.conv2d,
        xla_cpu_backward=3.5,
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
        memory=memory_counts.fashion_mnist_cnn,
        xla_cpu_backward=3.5,
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
        memory=memory_counts.application("resnet50"),
        optimizer_slots=1,
        graph_bytes=memory_counts.applications_graph,
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
        memory=memory_counts.application("inception_v3"),
        optimizer_slots=1,
        graph_bytes=memory_counts.applications_graph,
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
        memory=memory_counts.bilstm,
        graph_bytes=memory_counts.bilstm_graph,
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
        flops=_lm_flops,
        flops_by="formula",
        memory=memory_counts.llama,
        profile_by_layers=True,
    ),
):
    register(_workload)
assert names() == tuple(BUILTINS), "the registry and core.spec.BUILTINS must list the same models"
