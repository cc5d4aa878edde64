"""A multilayer perceptron: the simplest builder dashbench takes.

    python -m dashbench run --model examples/models/mlp.py:build --batch-size 64 --device cpu

`build()` takes no arguments and returns a keras.Model with fixed input shapes (batch aside); it is
not compiled, so dashbench trains it with Adam 1e-3 on a synthetic 10-class task made from its
input and output shapes. Change FEATURES, HIDDEN and CLASSES to size it.
"""

import keras

FEATURES = 256
HIDDEN = (512, 512)
CLASSES = 10


def build():
    inputs = keras.Input((FEATURES,), name="features")
    x = inputs
    for units in HIDDEN:
        x = keras.layers.Dense(units, activation="relu")(x)
    outputs = keras.layers.Dense(CLASSES, name="logits")(x)
    return keras.Model(inputs, outputs, name="mlp")


def build_tiny():
    """The same at a size that trains in seconds on a CPU (the tests use it)."""
    inputs = keras.Input((16,), name="features")
    x = keras.layers.Dense(32, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(4, name="logits")(x), name="mlp_tiny")
