"""The workloads' Keras side, for either backend: model builders, optimizers, synthetic batches,
losses, FLOPs and the real-data pipelines, by workload name. What each workload *is* (shapes, units,
defaults) is in dashbench.catalog, which needs no Keras.

Synthetic data is one global batch made in numpy from the seed — the same examples on TensorFlow
and JAX — put on the devices once and reused every step. Losses use keras.ops, not tf.*.
"""

from __future__ import annotations

from typing import Optional

from dashbench.catalog import Shapes
from dashbench.datasets import FASHION_CLASSES, load_fashion_mnist
from dashbench.engine.workloads import images, llama, text
from dashbench.engine.workloads.flops import count_flops


def build_model(name: str, shapes: Shapes):
    return _BUILDERS[name](shapes)


# Steps over which momentum SGD's learning rate ramps up linearly to its target.
WARMUP_STEPS = 10


# The BiLSTM's Adam learning rate times its width stays at or below this (see make_optimizer).
LSTM_LR_TIMES_WIDTH = 0.1


def make_optimizer(name: str, shapes: Shapes):
    import keras

    if name in ("resnet50", "inception_v3"):
        # tf_cnn_benchmarks (seed 003's GPU runs) trained these with momentum SGD, after a linear
        # warm-up (Goyal et al., 2017). Without it a fresh BatchNorm network on one small batch
        # overshoots within a few steps and its loss climbs back (ResNet-50, batch 8: 5.9 → 1.9 → 6.0).
        return keras.optimizers.SGD(learning_rate=_linear_warmup(0.01, WARMUP_STEPS), momentum=0.9)
    if name == "bilstm":
        # Adam moves every weight by about the learning rate a step, so a unit's input moves by up to
        # lr × its fan-in. At 1e-3 the full-width (1024) BiLSTM's loss leapt within three steps
        # (seed 0: 0.52 → 7.3; seed 2 even after a linear warm-up: 0.57 → 2.6) while width 64 fell
        # smoothly; capping lr × width keeps the step the same size at every width.
        return keras.optimizers.Adam(learning_rate=min(1e-3, LSTM_LR_TIMES_WIDTH / shapes.width))
    return keras.optimizers.Adam(learning_rate=1e-3)  # seed 000's CNN: Adam 1e-3


def _linear_warmup(target: float, steps: int):
    import keras

    class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            done = keras.ops.cast(step, "float32") + 1.0
            return target * keras.ops.minimum(1.0, done / steps)

        def get_config(self):
            return {"target": target, "steps": steps}

    return LinearWarmup()


def synthetic_batch(name: str, shapes: Shapes, global_batch: int, seed: int):
    """One deterministic global batch (x, y) as numpy arrays, the same on every backend and host."""
    return _SYNTHETIC[name](shapes, global_batch, seed)


def per_example_loss(name: str, y_true, y_pred):
    import keras
    from keras import ops

    y_pred = ops.cast(y_pred, "float32")  # losses in float32 under mixed precision
    if name == "conv2d":
        return ops.mean(ops.square(y_pred - ops.cast(y_true, "float32")), axis=-1)
    from_logits = name != "fashion_mnist_cnn"  # the seed's CNN ends in a softmax
    losses = keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=from_logits)
    # An LM's loss per sequence is its mean over the tokens: the batch's mean is the log-perplexity.
    return ops.mean(losses, axis=-1) if name == "llama" else losses


def flops_per_example(model) -> dict:
    """The model's analytic FLOPs per example (per token for an LM, by its formula), "source" analytic."""
    analytic = getattr(model, "analytic_flops", None)
    return {**(dict(analytic) if analytic else count_flops(model)), "source": "analytic"}


def real_dataset(data_path: Optional[str], global_batch: int, seed: int):
    """A shuffled, repeating tf.data pipeline of real Fashion-MNIST batches, scaled to [0, 1]."""
    import tensorflow as tf

    images, labels = load_fashion_mnist(data_path, FASHION_CLASSES)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).cache()
    dataset = dataset.shuffle(min(len(images), 60000), seed=seed, reshuffle_each_iteration=True).repeat()
    dataset = dataset.batch(global_batch, drop_remainder=True)
    dataset = dataset.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, y), num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def real_batches(data_path: Optional[str], global_batch: int, seed: int):
    """Real Fashion-MNIST batches as numpy (x in [0, 1], y), reshuffled every epoch, for ever.

    The JAX loop's pipeline: no tf.data, so a JAX-only install (a TPU VM's) needs no TensorFlow."""
    import numpy as np

    images, labels = load_fashion_mnist(data_path, FASHION_CLASSES)
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(len(images))
        for start in range(0, len(order) - global_batch + 1, global_batch):
            index = order[start : start + global_batch]
            yield images[index].astype(np.float32) / 255.0, labels[index]


_BUILDERS = {
    "conv2d": images.conv2d_model,
    "fashion_mnist_cnn": images.fashion_model,
    "resnet50": images.resnet50_model,
    "inception_v3": images.inception_model,
    "bilstm": text.bilstm_model,
    "llama": llama.llama_model,
}

_SYNTHETIC = {
    "conv2d": images.conv2d_batch,
    "fashion_mnist_cnn": images.classified_images,
    "resnet50": images.classified_images,
    "inception_v3": images.classified_images,
    "bilstm": text.bilstm_batch,
    "llama": llama.llama_batch,
}
