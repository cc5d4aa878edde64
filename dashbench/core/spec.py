"""RunSpec: what to measure. The one contract between the CLI, the job runner, the engine and the store.

No TensorFlow here: the dashboard validates specs without importing it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, fields
from typing import Any, Optional


@dataclass(frozen=True)
class Capabilities:
    """What a RunSpec's own checks need to know of a built-in workload. The rest of what a workload is
    (shapes, FLOPs, memory, presets, profile) lives in its registry entry (dashbench.workloads.registry),
    which takes these from here: core imports nothing above it, and a spec is checked here."""

    real_data: bool = False  # has a real-data reader (Fashion-MNIST IDX files); the others only synthetic
    folder_data: bool = False  # an image classifier that reads an image folder (train/, validation/)
    # Its synthetic data has a held-out split of its own (the LM's teacher text: dashbench.workloads.lm_text),
    # so it trains to a target on it; the others need real data for that.
    held_out_synthetic: bool = False
    loss_target: bool = False  # its to-accuracy target is a validation loss (MLPerf Training's LM convention)


# The built-in workloads, in the order every list shows them.
BUILTINS = {
    "conv2d": Capabilities(),
    "fashion_mnist_cnn": Capabilities(real_data=True, folder_data=True),
    "resnet50": Capabilities(folder_data=True),
    "inception_v3": Capabilities(folder_data=True),
    "bilstm": Capabilities(),
    "llama": Capabilities(held_out_synthetic=True, loss_target=True),
}
MODELS = tuple(BUILTINS)
# A user's model file is stored under its identity: file name, builder and the first 12 hex digits of
# its sha256 ('mlp.py:build@3fa9c2d1e0b4', 'vit.keras@…'), so the same file groups together from any
# host; model_path says where it was on the host that queued it (dashbench/workloads/model_file.py).
# A model file's name before its suffix: one line of any characters (spaces and Unicode too) but control
# characters and path separators, at most 200; a builder is a Python name (Unicode too) of at most 100.
MODEL_FILE_NAME = r"[^\x00-\x1f\x7f-\x9f/\\]{1,200}"
MODEL_BUILDER = r"[^\W\d]\w{0,99}"
MODEL_IDENTITY = re.compile(MODEL_FILE_NAME + r"\.(py:" + MODEL_BUILDER + r"|keras)@[0-9a-f]{12}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
DEVICES = ("auto", "cpu", "gpu", "tpu")
# Keras 3's backend for the run. TensorFlow (TPUStrategy on a TPU) is the product's promise and the
# default; JAX is what today's TPU stacks run. Each run process loads exactly one of them.
BACKENDS = ("tensorflow", "jax")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
DATA_SOURCES = ("synthetic", "real", "folder")
# The built-ins of each capability, as the checks below and their messages name them.
REAL_DATA_MODELS = tuple(name for name, can in BUILTINS.items() if can.real_data)
FOLDER_DATA_MODELS = tuple(name for name, can in BUILTINS.items() if can.folder_data)
HELD_OUT_SYNTHETIC_MODELS = tuple(name for name, can in BUILTINS.items() if can.held_out_synthetic)
LOSS_TARGET_MODELS = tuple(name for name, can in BUILTINS.items() if can.loss_target)
# A to-accuracy run with a target and no max_epochs stops after this many epochs.
DEFAULT_MAX_EPOCHS = 20
# Upper bounds of the whole-number fields: far above any run that fits on today's devices, low
# enough that a stray digit is an error naming the field, never an OverflowError from SQLite,
# NumPy or TensorFlow (2**31 - 1: TensorFlow's int32 shapes; 2**32 - 1: NumPy's seed).
MAX_INT32 = 2**31 - 1
LIMITS = {
    "batch_size": MAX_INT32,
    "steps": 10**9,
    "warmup": 10**9,
    "steps_per_loop": 10**9,
    "replicas": 65536,
    "image_size": 8192,
    "seq_len": 1_048_576,
    "width": 65536,
    "layers": 1024,
    "seed": 2**32 - 1,
    "repeats": 1000,
    "max_epochs": 100_000,
    "epochs": 100_000,
    "steps_per_epoch": 10**9,
    "eval_every": 10**9,
    "seeds": 1000,
}
# A run records one sample per host loop (warm-up and measured, every repeat): bounded so that a run's
# rows, its bundle and the pages that chart it stay small. More steps fit in as many loops with a
# larger steps_per_loop.
MAX_SAMPLES = 100_000


# Run ids and sweep ids travel in bundles, URLs, file names and shell commands: one short word of
# plain characters. Every way a run comes in (run, sweep, preset, the job queue, import) checks
# them here, so what one accepts the others accept too.
ID_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}")
ID_TEXT = "1-128 letters, digits or ._:+- (starting with a letter or digit)"
TEXT_LIMIT = 1000  # a label, a TPU name, a data path: one line, not a document
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class SpecError(ValueError):
    """Bad input. The message names the field and what is allowed, on one line."""

    def __init__(self, field_name: str, message: str):
        self.field = field_name
        super().__init__(f"{field_name}: {message}")


def _choices(values) -> str:
    return ", ".join(values)


@dataclass(frozen=True)
class RunSpec:
    model: str
    batch_size: int
    device: str = "auto"
    backend: str = "tensorflow"
    precision: str = "float32"
    xla: bool = False
    steps: int = 20
    warmup: int = 2
    steps_per_loop: int = 1
    replicas: Optional[int] = None  # CPU: logical devices; GPU: GPUs used; None: all (1 on CPU)
    data: str = "synthetic"
    data_path: Optional[str] = None
    # Shape overrides: None means the workload's full-size default.
    image_size: Optional[int] = None
    seq_len: Optional[int] = None
    width: Optional[int] = None
    layers: Optional[int] = None  # a decoder LM's blocks (llama)
    tpu: Optional[str] = None  # TPU name or grpc address; None: the local TPU VM
    label: Optional[str] = None
    seed: int = 0
    repeats: int = 1  # measured windows after one compile; the run's figure is their median
    # To accuracy: train on the train split, evaluate the whole held-out split after every
    # epoch (or every eval_every steps), stop at the target or after max_epochs; or a fixed epochs count.
    target_accuracy: Optional[float] = None  # in (0, 1]
    # Or a validation loss going down (mean cross-entropy in nats; an LM's log-perplexity, MLPerf's 3.3).
    target_loss: Optional[float] = None
    max_epochs: Optional[int] = None  # with a target; None: DEFAULT_MAX_EPOCHS
    epochs: Optional[int] = None  # a fixed count (the Colab article's way); exclusive with target_accuracy
    steps_per_epoch: Optional[int] = None  # None: one pass over the train split; else the data repeats
    eval_every: Optional[int] = None  # evaluate every K training steps; None: after every epoch
    seeds: int = 1  # seed, seed + 1, ... trained one after another in one run
    model_path: Optional[str] = None  # a user's model file (absolute), None for a built-in
    model_sha256: Optional[str] = None  # its content hash when the run was set up

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        _check_model(self)
        _positive_int("batch_size", self.batch_size)
        if self.device not in DEVICES:
            raise SpecError("device", f"unknown device {self.device!r}; choose one of: {_choices(DEVICES)}")
        if self.backend not in BACKENDS:
            raise SpecError("backend", f"unknown backend {self.backend!r}; choose one of: {_choices(BACKENDS)}")
        if self.backend == "jax" and self.tpu is not None:
            raise SpecError("tpu", "the jax backend uses the TPU of this VM (or pod slice) only; drop --tpu")
        if self.precision not in PRECISIONS:
            raise SpecError("precision", f"unknown precision {self.precision!r}; choose one of: {_choices(PRECISIONS)}")
        if not isinstance(self.xla, bool):
            raise SpecError("xla", f"must be true or false, got {self.xla!r}")
        _positive_int("steps", self.steps)
        _int_at_least("warmup", self.warmup, 0)
        _positive_int("steps_per_loop", self.steps_per_loop)
        # A to-accuracy run trains by epochs: its steps and warm-up are not used (accuracy_data.plan).
        if not self.to_accuracy and self.steps % self.steps_per_loop:
            raise SpecError(
                "steps",
                f"{self.steps} is not a multiple of steps_per_loop {self.steps_per_loop}: "
                f"use e.g. {self.steps_per_loop * max(1, self.steps // self.steps_per_loop)}",
            )
        if self.replicas is not None:
            _positive_int("replicas", self.replicas)
            if self.batch_size % self.replicas:
                raise SpecError("batch_size", divisibility_message(self.batch_size, self.replicas))
        if self.data not in DATA_SOURCES:
            raise SpecError("data", f"unknown data source {self.data!r}; choose one of: {_choices(DATA_SOURCES)}")
        if self.data == "real" and self.model not in REAL_DATA_MODELS:
            raise SpecError(
                "data", f"real data exists only for {_choices(REAL_DATA_MODELS)}; use synthetic for {self.model}"
            )
        for name in ("image_size", "seq_len", "width", "layers"):
            value = getattr(self, name)
            if value is not None:
                _positive_int(name, value)
        _int_at_least("seed", self.seed, 0)
        _positive_int("repeats", self.repeats)
        if not self.to_accuracy:
            _check_loops(self)
        _check_to_accuracy(self)
        check_texts(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def to_accuracy(self) -> bool:
        """A to-accuracy run (a target or a fixed epoch count): it evaluates on a held-out split."""
        return self.target is not None or self.epochs is not None

    @property
    def target(self) -> Optional[float]:
        """The target's value, an accuracy or a loss (target_metric says which); None without one."""
        return self.target_loss if self.target_loss is not None else self.target_accuracy

    @property
    def target_metric(self) -> str:
        """The curve's column the target is read against: val_loss (falls to it) or val_accuracy (rises)."""
        return "val_loss" if self.target_loss is not None or self.model in LOSS_TARGET_MODELS else "val_accuracy"

    def epoch_limit(self) -> Optional[int]:
        """The epochs this run trains at most (None for a throughput run)."""
        if self.epochs is not None:
            return self.epochs
        if self.target is not None:
            return self.max_epochs or DEFAULT_MAX_EPOCHS
        return None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunSpec":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(unknown[0], f"unknown field; known fields: {_choices(sorted(known))}")
        for required in ("model", "batch_size"):
            if required not in data:
                raise SpecError(required, "is required")
        return cls(**data)

    def replace(self, **changes) -> "RunSpec":
        return dataclasses.replace(self, **changes)


def is_user_model(spec) -> bool:
    return getattr(spec, "model", None) not in MODELS


def has_held_out(model: Optional[str], data: Optional[str]) -> bool:
    """Whether a run of `model` on `data` can train to accuracy, so may carry an accuracy block: real data
    with its held-out split, or a model whose synthetic data has one."""
    return data in ("real", "folder") or (data in (None, "synthetic") and model in HELD_OUT_SYNTHETIC_MODELS)


def _check_model(spec: "RunSpec") -> None:
    if spec.model in MODELS:
        for name in ("model_path", "model_sha256"):
            if getattr(spec, name) is not None:
                raise SpecError(name, f"belongs to a model file; the built-in {spec.model} has none")
        return
    if not isinstance(spec.model, str) or not MODEL_IDENTITY.fullmatch(spec.model):
        raise SpecError(
            "model",
            f"unknown model {_short(spec.model)}; choose one of: {_choices(MODELS)}, "
            "or a model file: path/file.py:build or path/model.keras",
        )
    if not isinstance(spec.model_path, str) or not spec.model_path:
        raise SpecError("model_path", "a model file's run names the file (its absolute path)")
    check_text("model_path", spec.model_path)
    if (
        not isinstance(spec.model_sha256, str)
        or not _SHA256.fullmatch(spec.model_sha256)
        or not spec.model.endswith("@" + spec.model_sha256[:12])
    ):
        raise SpecError("model_sha256", f"must be the file's sha256 (64 hex digits) that {spec.model} ends with")
    for name in ("image_size", "seq_len", "width"):
        if getattr(spec, name) is not None:
            raise SpecError(name, "a model file has its own fixed input shapes: drop the override")


def check_id(field_name: str, value: Any, null: bool = False) -> None:
    """A run id or a sweep id, as every way in takes it (SpecError naming the field otherwise)."""
    if value is None and null:
        return
    if not isinstance(value, str) or not ID_RULE.fullmatch(value):
        raise SpecError(field_name, f"must be {ID_TEXT}, got {_short(value)}")


def check_texts(spec: "RunSpec") -> None:
    """The spec's free text (label, data path, TPU name): what a store refuses even from a spec made in code."""
    for name in ("label", "data_path", "tpu"):
        check_text(name, getattr(spec, name))


def check_text(field_name: str, value: Any, limit: int = TEXT_LIMIT) -> None:
    """None, or one line of at most `limit` characters (a label, a TPU name, a data path)."""
    if value is None:
        return
    if not isinstance(value, str):
        raise SpecError(field_name, f"must be text, got {_short(value)}")
    if len(value) > limit:
        raise SpecError(field_name, f"must be at most {limit} characters, got {len(value)}")
    if _CONTROL.search(value):
        raise SpecError(
            field_name, f"must be one line without control characters (newline, tab, escape), got {_short(value)}"
        )


def _check_to_accuracy(spec: "RunSpec") -> None:
    target = spec.target_accuracy
    if target is not None:
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target <= 1:
            raise SpecError("target_accuracy", f"must be a fraction in (0, 1], e.g. 0.9, got {_short(target)}")
        if spec.model in LOSS_TARGET_MODELS:
            raise SpecError(
                "target_accuracy",
                f"{spec.model} trains to a validation loss: use target_loss "
                f"(e.g. 3.3, MLPerf Training's log-perplexity for Llama 3.1 8B)",
            )
    loss = spec.target_loss
    if loss is not None:
        if isinstance(loss, bool) or not isinstance(loss, (int, float)) or not math.isfinite(loss) or loss <= 0:
            raise SpecError(
                "target_loss", f"must be a finite number > 0 (a validation loss in nats, e.g. 3.3), got {_short(loss)}"
            )
        if target is not None:
            raise SpecError("target_loss", "target_accuracy and target_loss exclude each other: give one")
    target = spec.target
    for name in ("max_epochs", "epochs", "steps_per_epoch", "eval_every"):
        if getattr(spec, name) is not None:
            _positive_int(name, getattr(spec, name))
    _positive_int("seeds", spec.seeds)
    if target is not None and spec.epochs is not None:
        named = "target_loss" if spec.target_loss is not None else "target_accuracy"
        raise SpecError(
            "epochs",
            f"a fixed epoch count and {named} exclude each other: give one "
            "(with a target, max_epochs bounds the training)",
        )
    if not spec.to_accuracy:
        for name in ("max_epochs", "steps_per_epoch", "eval_every"):
            if getattr(spec, name) is not None:
                raise SpecError(name, "belongs to a to-accuracy run: also set target_accuracy (or epochs)")
        if spec.seeds != 1:
            raise SpecError(
                "seeds",
                "several seeds belong to a to-accuracy run: also set target_accuracy "
                "(or epochs); a throughput run repeats with repeats",
            )
        if spec.data == "folder":
            raise SpecError("data", "an image folder is read by to-accuracy runs: also set target_accuracy (or epochs)")
    elif spec.data == "synthetic" and spec.model not in HELD_OUT_SYNTHETIC_MODELS:
        name = "target_loss" if spec.target_loss is not None else "target_accuracy" if target is not None else "epochs"
        raise SpecError(
            name,
            "needs real data with a held-out split: use data real (Fashion-MNIST IDX "
            "train + t10k files) or data folder (train/ and validation/)",
        )
    elif spec.repeats != 1:
        raise SpecError("repeats", "a to-accuracy run repeats with seeds, not repeats: drop repeats")
    if spec.data == "folder":
        if spec.model not in FOLDER_DATA_MODELS and not is_user_model(spec):
            raise SpecError(
                "data", f"an image folder feeds the image classifiers {_choices(FOLDER_DATA_MODELS)}; not {spec.model}"
            )
        if not spec.data_path:
            raise SpecError(
                "data_path", "data folder needs --data-path FOLDER (train/ and validation/, a subfolder per class)"
            )


def host_loops(spec) -> tuple[int, int]:
    """(warm-up loops, measured loops per repeat): the engine's host calls after the compile, one sample each."""
    return -(-spec.warmup // spec.steps_per_loop), spec.steps // spec.steps_per_loop


def _check_loops(spec: "RunSpec") -> None:
    warm, measured = host_loops(spec)
    loops = warm + measured * spec.repeats
    if loops <= MAX_SAMPLES:
        return
    fits = [k for k in _divisors(spec.steps) if -(-spec.warmup // k) + spec.steps // k * spec.repeats <= MAX_SAMPLES]
    raise SpecError(
        "steps",
        f"{spec.steps} steps{f' x {spec.repeats} repeats' if spec.repeats > 1 else ''} "
        f"(+ {spec.warmup} warm-up) at steps_per_loop {spec.steps_per_loop} are {loops} host "
        f"loops, one sample each; a run records at most {MAX_SAMPLES}: "
        + (f"use steps_per_loop {fits[0]}" if fits else "use fewer steps, warm-up or repeats"),
    )


def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, int(n**0.5) + 1) if n % k == 0]
    return sorted({*small, *(n // k for k in small)})


def divisibility_message(batch_size: int, replicas: int) -> str:
    suggestion = replicas * max(1, round(batch_size / replicas))
    return (
        f"batch size {batch_size} is not divisible by {replicas} replicas: "
        f"use a multiple of {replicas} (e.g. {suggestion})"
    )


# What a number typed on the command line may look like: ASCII digits, a sign, spaces around it. Python's
# int() and float() also read fullwidth and other scripts' digits (８ is 8) and underscores (1_000).
_ASCII_INT = re.compile(r"[+-]?[0-9]+")
_ASCII_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def ascii_int(text: str) -> int:
    """int(text) for ASCII decimal digits only (`0x10`, `８`, `1_000` raise ValueError, as int() raises for 0x10)."""
    stripped = str(text).strip()
    if not _ASCII_INT.fullmatch(stripped):
        raise ValueError(f"not a whole number in ASCII digits: {_short(text)}")
    return int(stripped)


def ascii_float(text: str) -> float:
    """float(text) for an ASCII decimal number only (no `inf`, `nan`, `８`, `1_0`); raises ValueError."""
    stripped = str(text).strip()
    if not _ASCII_FLOAT.fullmatch(stripped):
        raise ValueError(f"not a number in ASCII digits: {_short(text)}")
    return float(stripped)


def parse_batch_sizes(text: str) -> list[int]:
    """A sweep's batch sizes, '32, 64,128' → [32, 64, 128] (the CLI's --batch-sizes and the Run page's
    sweep field). Commas, spaces or semicolons separate; a repeated size is measured once. An empty
    item between two commas ('32,,64') is a typo, refused: the size meant there is not guessed."""
    rule = "must be whole numbers >= 1 separated by commas, e.g. 32,64,128"
    sizes: list[int] = []
    items = [item.strip() for item in (text or "").replace(";", ",").split(",")]
    if any(not item for item in items[1:-1]):
        raise SpecError("batch_sizes", f"empty item between commas in {_short(text)}: {rule}")
    for part in (word for item in items for word in item.split()):
        try:
            value = ascii_int(part)
        except ValueError:
            raise SpecError("batch_sizes", f"{rule}; {_short(part)} is not") from None
        if value < 1:
            raise SpecError("batch_sizes", f"{rule}; {value} is not")
        if value > LIMITS["batch_size"]:
            raise SpecError(
                "batch_sizes", f"{_short(value)} is too large: a batch size is at most {LIMITS['batch_size']}"
            )
        if value not in sizes:
            sizes.append(value)
    if not sizes:
        raise SpecError("batch_sizes", f"give at least one batch size: {rule}")
    return sizes


def _positive_int(name: str, value: Any) -> None:
    _int_at_least(name, value, 1)


def _int_at_least(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(name, f"must be an integer, got {_short(value)}")
    if value < low:
        raise SpecError(name, f"must be an integer >= {low}, got {value}")
    high = LIMITS.get(name)
    if high is not None and value > high:
        raise SpecError(name, f"must be an integer from {low} to {high}, got {_short(value)}")


def _short(value: Any) -> str:
    """A value for an error line: a 5000-digit number is cut, not printed whole."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}… ({len(text)} characters)"


SPEC_DEFAULTS = {f.name: f.default for f in fields(RunSpec) if f.default is not dataclasses.MISSING}
