"""The image workloads' Keras side (either backend): conv2d, the Fashion-MNIST CNN and the keras.applications
models (ResNet50, InceptionV3), and their synthetic batches in numpy, the same on both backends.
Keras loads inside the functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dashbench.workloads.registry import Shapes


def conv2d_model(s: Shapes):
    import keras

    inputs = keras.Input((s.image_size, s.image_size, s.channels))
    x = keras.layers.Conv2D(s.width, 5, strides=2, padding="same", use_bias=False, name="conv")(inputs)
    outputs = keras.layers.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(inputs, outputs, name="conv2d")


def fashion_model(s: Shapes):
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


def resnet50_model(s: Shapes):
    import keras

    return keras.applications.ResNet50(
        weights=None,
        input_shape=(s.image_size, s.image_size, s.channels),
        classes=s.classes,
        classifier_activation=None,
    )


def inception_model(s: Shapes):
    import keras

    return keras.applications.InceptionV3(
        weights=None,
        input_shape=(s.image_size, s.image_size, s.channels),
        classes=s.classes,
        classifier_activation=None,
    )


def _images(s: Shapes, batch: int, seed: int):
    import numpy as np

    rng = np.random.default_rng([seed, 1])
    return rng.random((batch, s.image_size, s.image_size, s.channels), dtype=np.float32)


def _image_class_labels(x, classes: int, seed: int):
    """Labels from the images: argmax of a fixed random projection of a 4×4 average-pooled copy."""
    import numpy as np

    batch, side, _, channels = x.shape
    window = side // 4
    pooled = x[:, : 4 * window, : 4 * window, :].reshape(batch, 4, window, 4, window, channels).mean(axis=(2, 4))
    features = pooled.reshape(batch, 16 * channels)
    features = features - features.mean(axis=0, keepdims=True)
    projection = np.random.default_rng([seed, 2]).standard_normal((16 * channels, classes), dtype=np.float32)
    return np.argmax(features @ projection, axis=-1).astype(np.int32)


def conv2d_batch(s: Shapes, batch: int, seed: int):
    """Images and a teacher's targets: the spatial mean of a fixed 5×5 stride-2 'same' convolution.

    The mean of a convolution is the convolution of the means: each of the 25 kernel taps sees the
    mean of one strided, shifted window of the padded image, so the target costs 25 slices, not a conv.
    """
    import numpy as np

    rng = np.random.default_rng([seed, 1])
    x = rng.standard_normal((batch, s.image_size, s.image_size, s.channels), dtype=np.float32)
    teacher = np.random.default_rng([seed, 2]).standard_normal((5, 5, s.channels, s.width), dtype=np.float32) * 0.1
    side = s.image_size
    out = -(-side // 2)
    pad_total = max((out - 1) * 2 + 5 - side, 0)
    before = pad_total // 2
    padded = np.pad(x, ((0, 0), (before, pad_total - before), (before, pad_total - before), (0, 0)))
    taps = np.stack(
        [padded[:, i : i + 2 * out : 2, j : j + 2 * out : 2, :].mean(axis=(1, 2)) for i in range(5) for j in range(5)],
        axis=1,
    )  # [batch, 25, channels]
    y = taps.reshape(batch, -1) @ teacher.reshape(-1, s.width)
    return x, y.astype(np.float32)


def classified_images(s: Shapes, batch: int, seed: int):
    x = _images(s, batch, seed)
    return x, _image_class_labels(x, s.classes, seed)
