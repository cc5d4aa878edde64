"""A model with a layer of its own: a token classifier whose feature mixer is a custom Keras layer,
registered with keras.saving.register_keras_serializable so that the model saves to (and loads from)
a .keras file.

    python -m dashbench run --model examples/models/custom_layer.py:build --batch-size 32 --device cpu

Its input is integer token ids; dashbench finds their range from the Embedding they feed. The dict
it returns says the loss itself (the richer form of the builder contract).
"""

import keras
from keras import layers, ops

VOCAB, LENGTH, WIDTH, CLASSES = 1000, 32, 64, 2


@keras.saving.register_keras_serializable(package="dashbench_examples")
class GatedMix(layers.Layer):
    """A gated linear unit across the features: x · W ⊙ sigmoid(x · V), with a residual."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        features = input_shape[-1]
        self.value = self.add_weight(shape=(features, self.units), initializer="glorot_uniform", name="value")
        self.gate = self.add_weight(shape=(features, self.units), initializer="glorot_uniform", name="gate")

    def call(self, x):
        return x + ops.matmul(x, self.value) * ops.sigmoid(ops.matmul(x, self.gate))

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def classifier(vocab=VOCAB, length=LENGTH, width=WIDTH, classes=CLASSES):
    tokens = keras.Input((length,), dtype="int32", name="tokens")
    x = layers.Embedding(vocab, width)(tokens)
    x = GatedMix(width)(x)
    x = GatedMix(width)(x)
    x = layers.GlobalAveragePooling1D()(x)
    return keras.Model(tokens, layers.Dense(classes, name="logits")(x), name="gated_mix")


def build():
    return {"model": classifier(), "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}


def build_tiny():
    return {
        "model": classifier(vocab=50, length=8, width=16),
        "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    }
