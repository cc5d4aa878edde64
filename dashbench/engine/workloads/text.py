"""The text workload's Keras side (either backend): the BiLSTM classifier and its synthetic token batches."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dashbench.workloads.registry import Shapes

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
    import numpy as np

    tokens = np.random.default_rng([seed, 1]).integers(0, s.vocab, (batch, s.seq_len), dtype=np.int32)
    labels = (tokens[:, 0] < s.vocab // 2).astype(np.int32)
    return tokens, labels
