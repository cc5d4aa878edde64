"""The workloads: name → model builder, synthetic batch, loss, FLOPs per example, unit.

Metadata (WORKLOADS, get, describe) imports no TensorFlow, so the dashboard and `models --json`
can list workloads for free. Builders import TensorFlow/Keras inside the functions.

Every workload trains on a *learnable* synthetic task — labels are a fixed function of the inputs —
so a working run shows a falling loss and a broken one (the seed's non-converging LSTM) shows up.
Synthetic data is one global batch generated on the devices once and reused every step.

FLOPs count the multiply-adds of convolutions, dense layers and LSTM gates (2 FLOPs each);
elementwise work (activations, normalisation, pooling, bias) is left out, as is usual for MFU.
A training step is the forward pass, the weight gradients (same cost) and the input gradients
(same cost), except for layers that come before any trainable variable: nothing needs their
input gradient.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from dashbench.spec import MODELS, RunSpec, SpecError

FASHION_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")
KERAS_FASHION_CACHE = Path("~/.keras/datasets/fashion-mnist")


@dataclass(frozen=True)
class Shapes:
    """The resolved shape of one run: the full-size defaults with the spec's overrides applied."""

    image_size: Optional[int] = None
    channels: Optional[int] = None
    seq_len: Optional[int] = None
    width: Optional[int] = None
    classes: int = 0
    vocab: Optional[int] = None

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Workload:
    name: str
    unit: str  # "images" | "sequences"
    description: str
    defaults: dict  # full-size shapes: image_size/channels/seq_len/width/classes/vocab
    quick: dict  # shape overrides and batch size for a ~30 s CPU run
    batch_sizes: dict  # default global batch per device class
    overrides: tuple  # which of image_size, seq_len, width this workload accepts
    min_image_size: int = 1
    notes: dict = field(default_factory=dict)

    def shapes(self, spec: RunSpec) -> Shapes:
        values = dict(self.defaults)
        for name in ("image_size", "seq_len", "width"):
            value = getattr(spec, name)
            if value is None:
                continue
            if name not in self.overrides:
                allowed = ", ".join(self.overrides) or "none"
                raise SpecError(name, f"{self.name} has no {name} override; it accepts: {allowed}")
            values[name] = value
        if values.get("image_size") is not None and values["image_size"] < self.min_image_size:
            raise SpecError(
                "image_size", f"{self.name} needs images of at least {self.min_image_size} px, got {values['image_size']}"
            )
        if spec.data == "real" and values.get("image_size") != self.defaults.get("image_size"):
            raise SpecError("image_size", f"real {self.name} data is {self.defaults['image_size']} px; drop the override")
        return Shapes(**values)

    def describe(self) -> dict:
        return {
            "name": self.name,
            "unit": self.unit,
            "description": self.description,
            "defaults": dict(self.defaults),
            "quick": dict(self.quick),
            "batch_sizes": dict(self.batch_sizes),
            "overrides": list(self.overrides),
            "real_data": self.name == "fashion_mnist_cnn",
            **({"notes": dict(self.notes)} if self.notes else {}),
        }

    # The TensorFlow side, dispatched by name so the metadata above stays a plain record.
    def build_model(self, shapes: Shapes):
        return _BUILDERS[self.name](shapes)

    def make_optimizer(self):
        import keras

        if self.name in ("resnet50", "inception_v3"):
            # tf_cnn_benchmarks (seed 003's GPU runs) trained these with momentum SGD.
            return keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
        return keras.optimizers.Adam(learning_rate=1e-3)  # seed 000's CNN: Adam 1e-3

    def synthetic_batch(self, shapes: Shapes, global_batch: int, seed: int):
        """One deterministic global batch (x, y) as tensors, built where the caller's device scope says."""
        return _SYNTHETIC[self.name](shapes, global_batch, seed)

    def per_example_loss(self, y_true, y_pred):
        import keras
        import tensorflow as tf

        y_pred = tf.cast(y_pred, tf.float32)  # losses in float32 under mixed precision
        if self.name == "conv2d":
            return tf.reduce_mean(tf.square(y_pred - y_true), axis=-1)
        from_logits = self.name != "fashion_mnist_cnn"  # the seed's CNN ends in a softmax
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=from_logits)

    def flops_per_example(self, model) -> dict:
        return count_flops(model)


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
            defaults={"image_size": 28, "channels": 1, "width": 64, "classes": 10},
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
    )
}
assert tuple(WORKLOADS) == MODELS, "the registry and spec.MODELS must list the same models"

BILSTM_EMBEDDING = 256


def get(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise SpecError("model", f"unknown model {name!r}; choose one of: {', '.join(WORKLOADS)}") from None


def describe_all() -> list[dict]:
    return [w.describe() for w in WORKLOADS.values()]


def check_spec(spec: RunSpec) -> Shapes:
    """Every check of `spec` that needs no TensorFlow: the workload's shape overrides and, for real
    data, that the IDX files are there. Callers run it before a run row is created, so bad input
    is an error line, never a junk `failed` run. Returns the resolved shapes."""
    shapes = get(spec.model).shapes(spec)
    if spec.data == "real":
        fashion_mnist_dir(spec.data_path)
    return shapes


# --- models ----------------------------------------------------------------------------------

def _conv2d_model(s: Shapes):
    import keras

    inputs = keras.Input((s.image_size, s.image_size, s.channels))
    x = keras.layers.Conv2D(s.width, 5, strides=2, padding="same", use_bias=False, name="conv")(inputs)
    outputs = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(inputs, outputs, name="conv2d")


def _fashion_model(s: Shapes):
    import keras
    from keras import layers

    w = s.width
    model = keras.Sequential(name="fashion_mnist_cnn")
    model.add(keras.Input((s.image_size, s.image_size, s.channels)))
    for filters in (w, 2 * w, 4 * w):
        model.add(layers.BatchNormalization())
        model.add(layers.Conv2D(filters, (5, 5), padding="same", activation="elu"))
        model.add(layers.MaxPooling2D(pool_size=(2, 2), strides=(2, 2)))
        model.add(layers.Dropout(0.25))
    model.add(layers.Flatten())
    model.add(layers.Dense(4 * w))
    model.add(layers.Activation("elu"))
    model.add(layers.Dropout(0.5))
    model.add(layers.Dense(s.classes))
    model.add(layers.Activation("softmax", dtype="float32"))  # float32 probabilities under mixed precision
    return model


def _resnet50_model(s: Shapes):
    import keras

    return keras.applications.ResNet50(
        weights=None, input_shape=(s.image_size, s.image_size, s.channels), classes=s.classes,
        classifier_activation=None,
    )


def _inception_model(s: Shapes):
    import keras

    return keras.applications.InceptionV3(
        weights=None, input_shape=(s.image_size, s.image_size, s.channels), classes=s.classes,
        classifier_activation=None,
    )


def _bilstm_model(s: Shapes):
    import keras
    from keras import layers

    inputs = keras.Input((s.seq_len,), dtype="int32")
    x = layers.Embedding(s.vocab, BILSTM_EMBEDDING)(inputs)
    x = layers.Bidirectional(layers.LSTM(s.width))(x)
    outputs = layers.Dense(s.classes)(x)
    return keras.Model(inputs, outputs, name="bilstm")


_BUILDERS = {
    "conv2d": _conv2d_model,
    "fashion_mnist_cnn": _fashion_model,
    "resnet50": _resnet50_model,
    "inception_v3": _inception_model,
    "bilstm": _bilstm_model,
}


# --- synthetic data --------------------------------------------------------------------------

def _images(s: Shapes, batch: int, seed: int):
    import tensorflow as tf

    return tf.random.stateless_uniform([batch, s.image_size, s.image_size, s.channels], seed=[seed, 1])


def _image_class_labels(x, classes: int, seed: int):
    """Labels from the images: argmax of a fixed random projection of a 4×4 average-pooled copy.

    Average pooling rather than an area resize: it has an XLA kernel, so the same code runs on a TPU.
    """
    import tensorflow as tf

    window = x.shape[1] // 4
    pooled = tf.nn.avg_pool2d(x, ksize=window, strides=window, padding="VALID")[:, :4, :4, :]
    features = tf.reshape(pooled, [-1, 16 * x.shape[-1]])
    features -= tf.reduce_mean(features, axis=0, keepdims=True)
    projection = tf.random.stateless_normal([features.shape[-1], classes], seed=[seed, 2])
    return tf.argmax(features @ projection, axis=-1, output_type=tf.int32)


def _conv2d_batch(s: Shapes, batch: int, seed: int):
    import tensorflow as tf

    x = tf.random.stateless_normal([batch, s.image_size, s.image_size, s.channels], seed=[seed, 1])
    teacher = tf.random.stateless_normal([5, 5, s.channels, s.width], seed=[seed, 2]) * 0.1
    y = tf.reduce_mean(tf.nn.conv2d(x, teacher, strides=2, padding="SAME"), axis=[1, 2])
    return x, y


def _classified_images(s: Shapes, batch: int, seed: int):
    x = _images(s, batch, seed)
    return x, _image_class_labels(x, s.classes, seed)


def _bilstm_batch(s: Shapes, batch: int, seed: int):
    import tensorflow as tf

    tokens = tf.random.stateless_uniform([batch, s.seq_len], seed=[seed, 1], maxval=s.vocab, dtype=tf.int32)
    labels = tf.cast(tokens[:, 0] < s.vocab // 2, tf.int32)
    return tokens, labels


_SYNTHETIC = {
    "conv2d": _conv2d_batch,
    "fashion_mnist_cnn": _classified_images,
    "resnet50": _classified_images,
    "inception_v3": _classified_images,
    "bilstm": _bilstm_batch,
}


# --- FLOPs -----------------------------------------------------------------------------------

def layer_forward_flops(layer) -> float:
    """Forward FLOPs of one layer for one example (2 per multiply-add); 0 for elementwise layers."""
    import keras

    if isinstance(layer, keras.layers.Bidirectional):
        return layer_forward_flops_lstm(layer.forward_layer, layer.input.shape) + layer_forward_flops_lstm(
            layer.backward_layer, layer.input.shape
        )
    if isinstance(layer, keras.layers.LSTM):
        return layer_forward_flops_lstm(layer, layer.input.shape)
    if isinstance(layer, keras.layers.DepthwiseConv2D):
        kh, kw = layer.kernel_size
        return 2.0 * _prod(layer.output.shape[1:]) * kh * kw
    if isinstance(layer, keras.layers.Conv2D):
        kh, kw = layer.kernel_size
        in_channels = layer.input.shape[-1] // layer.groups
        return 2.0 * _prod(layer.output.shape[1:]) * kh * kw * in_channels
    if isinstance(layer, keras.layers.Dense):
        return 2.0 * _prod(layer.output.shape[1:]) * layer.input.shape[-1]
    return 0.0


def layer_forward_flops_lstm(lstm, input_shape) -> float:
    steps, features = input_shape[1], input_shape[-1]
    # Four gates, each a product of [input, state] with a (features + units) × units matrix.
    return 2.0 * steps * 4 * lstm.units * (features + lstm.units)


def count_flops(model) -> dict:
    """Forward and training FLOPs per example of a built functional/Sequential Keras model."""
    forward = training = 0.0
    seen_trainable = False
    for layer in model.layers:
        flops = layer_forward_flops(layer)
        has_weights = bool(layer.trainable_weights)
        passes = 1 + (1 if has_weights else 0) + (1 if seen_trainable else 0)
        forward += flops
        training += flops * passes
        seen_trainable = seen_trainable or has_weights
    return {"forward": forward, "training": training}


def _prod(values) -> float:
    out = 1.0
    for v in values:
        out *= v
    return out


# --- Fashion-MNIST IDX files -----------------------------------------------------------------

def fashion_mnist_dir(data_path: Optional[str]) -> Path:
    """The folder holding the Fashion-MNIST training IDX files, or a SpecError saying where to put them."""
    folder = Path(data_path).expanduser() if data_path else KERAS_FASHION_CACHE.expanduser()
    missing = [name for name in FASHION_FILES if _idx_file(folder, name) is None]
    if missing:
        hint = "pass --data-path FOLDER" if not data_path else "check the folder"
        raise SpecError(
            "data_path",
            f"no Fashion-MNIST file {missing[0]}[.gz] in {folder}; {hint}, or fill Keras's cache with "
            "keras.datasets.fashion_mnist.load_data()",
        )
    return folder


def load_fashion_mnist(data_path: Optional[str]) -> tuple[np.ndarray, np.ndarray]:
    """Training images (N, 28, 28, 1) uint8 and labels (N,) from IDX files, gzipped or not."""
    folder = fashion_mnist_dir(data_path)
    images = read_idx(_idx_file(folder, FASHION_FILES[0]))
    labels = read_idx(_idx_file(folder, FASHION_FILES[1]))
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise SpecError("data_path", f"IDX files in {folder} disagree: images {images.shape}, labels {labels.shape}")
    classes = get("fashion_mnist_cnn").defaults["classes"]
    if len(labels) and (labels.min() < 0 or labels.max() >= classes):
        # Caught here, not by the loss op: TF's error would come mid-run, wrapped in a graph trace.
        raise SpecError("data_path", f"labels in {folder} must be class numbers 0–{classes - 1}; found "
                                     f"{int(labels.min())}–{int(labels.max())} (a different dataset's file?)")
    return images[..., None], labels.astype(np.int32)


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (the MNIST format): zero bytes, a type code, the rank, big-endian sizes, data."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        data = handle.read()
    if len(data) < 4 or data[0:2] != b"\x00\x00":
        raise SpecError("data_path", f"{path} is not an IDX file")
    type_code, rank = data[2], data[3]
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if type_code not in dtypes:
        raise SpecError("data_path", f"{path}: unknown IDX type code 0x{type_code:02x}")
    dims = struct.unpack(f">{rank}I", data[4 : 4 + 4 * rank])
    array = np.frombuffer(data, dtype=dtypes[type_code], offset=4 + 4 * rank)
    if array.size != int(np.prod(dims)):
        raise SpecError("data_path", f"{path}: header says {dims} but holds {array.size} values")
    return array.reshape(dims).astype(array.dtype.newbyteorder("="))


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as an IDX file (gzipped when the name ends in .gz); used by tests and tools."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as handle:
        handle.write(header + array.tobytes())


def _idx_file(folder: Path, name: str) -> Optional[Path]:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


def real_dataset(data_path: Optional[str], global_batch: int, seed: int):
    """A shuffled, repeating tf.data pipeline of real Fashion-MNIST batches, scaled to [0, 1]."""
    import tensorflow as tf

    images, labels = load_fashion_mnist(data_path)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).cache()
    dataset = dataset.shuffle(min(len(images), 60000), seed=seed, reshuffle_each_iteration=True).repeat()
    dataset = dataset.batch(global_batch, drop_remainder=True)
    dataset = dataset.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, y), num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)
