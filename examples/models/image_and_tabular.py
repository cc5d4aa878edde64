"""A model of two inputs, an image and a row of tabular features, in the style of keras.io's
functional API guide (https://keras.io/guides/functional_api/#models-with-multiple-inputs-and-outputs):
a small convolutional branch and a dense branch, concatenated into one binary prediction.

    python -m dashbench run --model examples/models/image_and_tabular.py:build --batch-size 32 --device cpu
"""

import keras
from keras import layers

image_size = 64
num_features = 12


def build():
    image_input = keras.Input(shape=(image_size, image_size, 3), name="image")
    tabular_input = keras.Input(shape=(num_features,), name="tabular")

    x = layers.Conv2D(16, 3, activation="relu")(image_input)
    x = layers.MaxPooling2D(2)(x)
    x = layers.Conv2D(32, 3, activation="relu")(x)
    x = layers.GlobalAveragePooling2D()(x)

    t = layers.Dense(32, activation="relu")(tabular_input)
    t = layers.Dense(16, activation="relu")(t)

    x = layers.concatenate([x, t])
    x = layers.Dense(32, activation="relu")(x)
    outputs = layers.Dense(1, activation="sigmoid", name="label")(x)

    model = keras.Model(inputs=[image_input, tabular_input], outputs=outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="binary_crossentropy", metrics=["accuracy"])
    return model
