"""The image workloads' TensorFlow side: conv2d, the Fashion-MNIST CNN and the keras.applications
models (ResNet50, InceptionV3), and their synthetic batches. TensorFlow/Keras load inside the functions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dashbench.catalog import Shapes


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
        weights=None, input_shape=(s.image_size, s.image_size, s.channels), classes=s.classes,
        classifier_activation=None,
    )


def inception_model(s: Shapes):
    import keras

    return keras.applications.InceptionV3(
        weights=None, input_shape=(s.image_size, s.image_size, s.channels), classes=s.classes,
        classifier_activation=None,
    )


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


def conv2d_batch(s: Shapes, batch: int, seed: int):
    import tensorflow as tf

    x = tf.random.stateless_normal([batch, s.image_size, s.image_size, s.channels], seed=[seed, 1])
    teacher = tf.random.stateless_normal([5, 5, s.channels, s.width], seed=[seed, 2]) * 0.1
    y = tf.reduce_mean(tf.nn.conv2d(x, teacher, strides=2, padding="SAME"), axis=[1, 2])
    return x, y


def classified_images(s: Shapes, batch: int, seed: int):
    x = _images(s, batch, seed)
    return x, _image_class_labels(x, s.classes, seed)

