"""FLOPs per example of a built Keras model, for achieved TFLOP/s and MFU: the layer formula.

FLOPs count the multiply-adds of convolutions (of every kind: grouped, depthwise, separable,
transposed; 1-, 2- and 3-D), dense layers, LSTM gates and attention (its projections, Q·Kᵀ and the
weighted sum), 2 FLOPs each; an embedding is a gather (none); elementwise work (activations,
normalisation, pooling, bias) is left out, as is usual for MFU. A training step is the forward pass,
the weight gradients (same cost) and the input gradients (same cost), except for layers that come
before any trainable variable: nothing needs their input gradient.

`covers(model)` says whether the formula sees every layer that holds weights (a layer of another
kind, or a nested model, may do work the formula cannot count): a user's model is counted by the
formula only then, and the compiler's count stands beside it either way.
"""

from __future__ import annotations


def _covered_kinds():
    import keras

    L = keras.layers
    counted = (L.Bidirectional, L.LSTM, L.Embedding, L.MultiHeadAttention, L.Dense)
    convs = (L.Conv1D, L.Conv2D, L.Conv3D, L.DepthwiseConv1D, L.DepthwiseConv2D, L.SeparableConv1D)
    convs += (L.SeparableConv2D, L.Conv1DTranspose, L.Conv2DTranspose, L.Conv3DTranspose)
    # Weights whose work is elementwise: left out of MFU by the convention above, so still covered.
    elementwise = (L.BatchNormalization, L.LayerNormalization, L.GroupNormalization, L.PReLU)
    return counted + convs + elementwise


def covers(model) -> bool:
    """Does the layer formula count every layer of `model` that holds weights?"""
    import keras

    kinds = _covered_kinds()
    for layer in model.layers:
        if isinstance(layer, keras.Model) or (layer.weights and not isinstance(layer, kinds)):
            return False
        if isinstance(layer, keras.layers.MultiHeadAttention):
            try:  # its inputs as the model calls it: a call the formula cannot read is not covered
                attention_flops(layer)
            except Exception:
                return False
    return True


def layer_forward_flops(layer) -> float:
    """Forward FLOPs of one layer for one example (2 per multiply-add); 0 for elementwise layers."""
    import keras

    L = keras.layers
    if isinstance(layer, L.Bidirectional):
        return layer_forward_flops_lstm(layer.forward_layer, layer.input.shape) + layer_forward_flops_lstm(
            layer.backward_layer, layer.input.shape
        )
    if isinstance(layer, L.LSTM):
        return layer_forward_flops_lstm(layer, layer.input.shape)
    if isinstance(layer, L.MultiHeadAttention):
        return attention_flops(layer)
    if isinstance(layer, (L.DepthwiseConv1D, L.DepthwiseConv2D)):
        return 2.0 * _prod(layer.output.shape[1:]) * _prod(layer.kernel_size)
    if isinstance(layer, (L.SeparableConv1D, L.SeparableConv2D)):
        inner = layer.input.shape[-1] * layer.depth_multiplier
        spatial = _prod(layer.output.shape[1:-1])
        return 2.0 * spatial * inner * (_prod(layer.kernel_size) + layer.filters)
    if isinstance(layer, (L.Conv1DTranspose, L.Conv2DTranspose, L.Conv3DTranspose)):
        return 2.0 * _prod(layer.input.shape[1:]) * _prod(layer.kernel_size) * layer.filters
    if isinstance(layer, (L.Conv1D, L.Conv2D, L.Conv3D)):
        in_channels = layer.input.shape[-1] // layer.groups
        return 2.0 * _prod(layer.output.shape[1:]) * _prod(layer.kernel_size) * in_channels
    if isinstance(layer, L.Dense):
        return 2.0 * _prod(layer.output.shape[1:]) * layer.input.shape[-1]
    return 0.0


def attention_flops(layer) -> float:
    """Keras MultiHeadAttention on (query, value[, key]): the four projections, Q·Kᵀ and the weighted sum."""
    inputs = layer.input if isinstance(layer.input, (list, tuple)) else [layer.input]
    query, value = inputs[0].shape, inputs[1].shape if len(inputs) > 1 else inputs[0].shape
    key = inputs[2].shape if len(inputs) > 2 else value
    tq, tk = _prod(query[1:-1]), _prod(value[1:-1])
    heads, kd, vd = layer.num_heads, layer.key_dim, layer.value_dim or layer.key_dim
    out = layer.output.shape[-1]
    projections = tq * query[-1] * heads * kd + tk * key[-1] * heads * kd + tk * value[-1] * heads * vd
    return 2.0 * (projections + tq * tk * heads * (kd + vd) + tq * heads * vd * out)


def layer_forward_flops_lstm(lstm, input_shape) -> float:
    steps, features = input_shape[1], input_shape[-1]
    # Four gates, each a product of [input, state] with a (features + units) × units matrix.
    return 2.0 * steps * 4 * lstm.units * (features + lstm.units)


def count_flops(model) -> dict:
    """Forward and training FLOPs per example of a built functional/Sequential Keras model."""
    forward = training = 0.0
    seen_trainable = False
    for layer in model.layers:
        flops = layer_forward_flops(layer)
        has_weights = bool(layer.trainable_weights)
        passes = 1 + (1 if has_weights else 0) + (1 if seen_trainable else 0)
        forward += flops
        training += flops * passes
        seen_trainable = seen_trainable or has_weights
    return {"forward": forward, "training": training, "formula": "layers"}


def _prod(values) -> float:
    out = 1.0
    for v in values:
        out *= v
    return out
