"""The Llama-style decoder LM's Keras side (either backend): RMSNorm, rotary embeddings, SwiGLU and
grouped-query causal attention, built from plain Keras 3 layers, and its synthetic token batches.

Plain layers rather than keras-hub's Llama backbone: keras-hub pulls in tensorflow-text, which
brings the `tensorflow` package into a TPU (`tensorflow-tpu`) or JAX-only environment, and its
0.32 cannot sit beside TensorFlow 2.19. The shape rules are dashbench.workloads.lm_shape's.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from dashbench.engine.workloads.base import KerasWorkload
from dashbench.workloads import lm_shape, lm_text, registry

if TYPE_CHECKING:
    from dashbench.workloads.registry import Shapes


class LanguageModel(KerasWorkload):
    """A decoder LM: its loss per sequence is the mean over its tokens (so the batch's mean is the
    log-perplexity), and its FLOPs are its formula's, per token, which the built model carries."""

    def per_example_loss(self, y_true, y_pred):
        from keras import ops

        return ops.mean(super().per_example_loss(y_true, y_pred), axis=-1)

    def flops_per_example(self, model) -> dict:
        return dict(model.analytic_flops)


def dims_of(s: "Shapes") -> lm_shape.LMDims:
    return lm_shape.dims(s.width, s.layers, s.seq_len)


def llama_model(s: "Shapes"):
    import keras
    from keras import layers

    d = dims_of(s)
    tokens = keras.Input((d.seq_len,), dtype="int32")
    x = layers.Embedding(d.vocab, d.width, name="embed")(tokens)
    rope = _rope_tables(d)
    for index in range(d.layers):
        x = _block(d, rope, index)(x)
    x = layers.RMSNormalization(epsilon=lm_shape.NORM_EPSILON, name="final_norm")(x)
    logits = layers.Dense(d.vocab, use_bias=False, name="lm_head")(x)
    model = keras.Model(tokens, logits, name="llama")
    # Its registry entry's formula (PaLM's, as MaxText reports MFU): LanguageModel.flops_per_example reads it.
    model.analytic_flops = registry.get("llama").flops(s)
    return model


def _block(d: lm_shape.LMDims, rope, index: int):
    return _block_class()(d, rope, name=f"block_{index}")


@functools.cache
def _block_class():
    """The block's class, made once Keras is imported (the engine imports it lazily)."""
    import keras
    from keras import layers

    class DecoderBlock(layers.Layer):
        """Pre-norm residual block: x + attention(norm(x)), then + SwiGLU(norm(x))."""

        def __init__(self, d: lm_shape.LMDims, rope, **kwargs):
            super().__init__(**kwargs)
            self.d, self.rope = d, rope
            self.attention_norm = layers.RMSNormalization(epsilon=lm_shape.NORM_EPSILON)
            self.mlp_norm = layers.RMSNormalization(epsilon=lm_shape.NORM_EPSILON)
            self.q = layers.Dense(d.heads * d.head_dim, use_bias=False)
            self.k = layers.Dense(d.kv_heads * d.head_dim, use_bias=False)
            self.v = layers.Dense(d.kv_heads * d.head_dim, use_bias=False)
            self.o = layers.Dense(d.width, use_bias=False)
            self.gate = layers.Dense(d.mlp, use_bias=False)
            self.up = layers.Dense(d.mlp, use_bias=False)
            self.down = layers.Dense(d.width, use_bias=False)

        def build(self, input_shape):
            d = self.d
            for layer in (self.attention_norm, self.mlp_norm, self.q, self.k, self.v, self.gate, self.up):
                layer.build(input_shape)
            self.o.build((*input_shape[:-1], d.heads * d.head_dim))
            self.down.build((*input_shape[:-1], d.mlp))

        def compute_output_shape(self, input_shape):
            # A residual block keeps its input's shape. Said here, the functional model reads it instead
            # of tracing call() once more per block (a full-size model's profile builds 80 of them).
            return tuple(input_shape)

        def call(self, x):
            ops, d = keras.ops, self.d
            h = self.attention_norm(x)
            q = ops.reshape(self.q(h), (-1, d.seq_len, d.heads, d.head_dim))
            k = ops.reshape(self.k(h), (-1, d.seq_len, d.kv_heads, d.head_dim))
            v = ops.reshape(self.v(h), (-1, d.seq_len, d.kv_heads, d.head_dim))
            q, k = _rotate(q, self.rope), _rotate(k, self.rope)
            # GQA natively (KV heads divide query heads); flash_attention None: the backend's fused
            # kernel where it has one (cuDNN on a JAX GPU), the plain path elsewhere — TF has none.
            attended = ops.dot_product_attention(q, k, v, is_causal=True, flash_attention=None)
            x = x + self.o(ops.reshape(attended, (-1, d.seq_len, d.heads * d.head_dim)))
            h = self.mlp_norm(x)
            return x + self.down(ops.silu(self.gate(h)) * self.up(h))

    return DecoderBlock


def _rope_tables(d: lm_shape.LMDims):
    """cos and sin of each position × frequency, (T, head_dim / 2), as numpy constants."""
    import numpy as np

    half = d.head_dim // 2
    frequencies = 1.0 / lm_shape.ROPE_THETA ** (np.arange(half, dtype=np.float64) / half)
    angles = np.arange(d.seq_len, dtype=np.float64)[:, None] * frequencies[None, :]
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _rotate(x, rope):
    """Rotary embedding, the rotate-half form (Llama's): pairs (i, i + D/2) turn by position × frequency."""
    from keras import ops

    cos, sin = (ops.cast(ops.convert_to_tensor(t)[None, :, None, :], x.dtype) for t in rope)
    first, second = ops.split(x, 2, axis=-1)
    return ops.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def llama_batch(s: "Shapes", batch: int, seed: int):
    """(tokens, next tokens), each (batch, seq_len) int32: text from the fixed random bigram teacher
    (dashbench.workloads.lm_text), the same on every backend and host."""
    d = dims_of(s)
    return lm_text.batch(d.vocab, d.seq_len, batch, seed)
