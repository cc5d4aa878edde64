"""The text workload's TensorFlow side: the BiLSTM classifier and its synthetic token batches."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dashbench.catalog import Shapes

BILSTM_EMBEDDING = 256


def bilstm_model(s: Shapes):
    import keras
    from keras import layers

    inputs = keras.Input((s.seq_len,), dtype="int32")
    x = layers.Embedding(s.vocab, BILSTM_EMBEDDING)(inputs)
    x = layers.Bidirectional(layers.LSTM(s.width))(x)
    outputs = layers.Dense(s.classes)(x)
    return keras.Model(inputs, outputs, name="bilstm")


def bilstm_batch(s: Shapes, batch: int, seed: int):
    import tensorflow as tf

    tokens = tf.random.stateless_uniform([batch, s.seq_len], seed=[seed, 1], maxval=s.vocab, dtype=tf.int32)
    labels = tf.cast(tokens[:, 0] < s.vocab // 2, tf.int32)
    return tokens, labels

