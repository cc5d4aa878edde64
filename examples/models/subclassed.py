"""A subclassed model, the classic style of keras.io's guides (https://keras.io/guides/making_new_layers_and_models_via_subclassing/):
layers made in `__init__`, used in `call()`. It has no symbolic inputs until it is called, so the
builder names each input's shape (batch aside) and dtype, and dashbench builds the model from them.

    python -m dashbench run --model examples/models/subclassed.py:build --batch-size 32 --device cpu
"""

import keras
from keras import layers


class MyModel(keras.Model):
    def __init__(self, num_classes=10):
        super().__init__()
        self.dense1 = layers.Dense(64, activation="relu")
        self.dense2 = layers.Dense(64, activation="relu")
        self.dropout = layers.Dropout(0.1)
        self.classifier = layers.Dense(num_classes)

    def call(self, inputs, training=False):
        x = self.dense1(inputs)
        x = self.dropout(x, training=training)
        x = self.dense2(x)
        return self.classifier(x)


def build():
    return {"model": MyModel(), "inputs": {"digits": {"shape": (784,), "dtype": "float32"}}}
