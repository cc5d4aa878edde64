"""The workload object the engine holds for a run (workloads.of): what it asks of any workload, with
the defaults a built-in leaves as they are, and the real Fashion-MNIST pipelines."""

from __future__ import annotations

from typing import Callable, Optional

from dashbench.engine.workloads.flops import count_flops
from dashbench.workloads.datasets import FASHION_CLASSES, load_fashion_mnist
from dashbench.workloads.registry import Shapes


class KerasWorkload:
    """What the engine asks of a workload. A built-in gives its builder and synthetic batch maker and
    says how its loss reads the model's output; the rest has defaults (Adam 1e-3, the layer FLOP count,
    no real data). A subclass (a user's model) overrides what it knows better."""

    def __init__(
        self,
        name: str,
        build: Callable,
        batch: Callable,
        loss: str = "crossentropy_logits",
        optimizer: Optional[Callable] = None,
    ):
        self.name, self._build, self._batch, self._loss_kind = name, build, batch, loss
        self._optimizer = optimizer

    def build_model(self, shapes: Shapes):
        return self._build(shapes)

    def make_optimizer(self, shapes: Shapes):
        import keras

        return self._optimizer(shapes) if self._optimizer else keras.optimizers.Adam(learning_rate=1e-3)

    def synthetic_batch(self, shapes: Shapes, global_batch: int, seed: int):
        """One deterministic global batch (x, y) as numpy arrays, the same on every backend and host."""
        return self._batch(shapes, global_batch, seed)

    def per_example_loss(self, y_true, y_pred):
        import keras
        from keras import ops

        y_pred = ops.cast(y_pred, "float32")  # losses in float32 under mixed precision
        if self._loss_kind == "mse":
            return ops.mean(ops.square(y_pred - ops.cast(y_true, "float32")), axis=-1)
        from_logits = self._loss_kind == "crossentropy_logits"
        return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=from_logits)

    def flops_per_example(self, model) -> dict:
        return count_flops(model)

    def data_shapes(self, shapes: Shapes) -> Shapes:
        """The shapes a to-accuracy run's data is read at (a built-in's are its registry entry's)."""
        return shapes

    def identity(self, model) -> Optional[dict]:
        """What the run records of the model beyond its name (a user's file: its hash, inputs…)."""
        return None

    def real_dataset(self, data_path: Optional[str], global_batch: int, seed: int):
        return real_dataset(data_path, global_batch, seed)

    def real_batches(self, data_path: Optional[str], global_batch: int, seed: int):
        return real_batches(data_path, global_batch, seed)


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
