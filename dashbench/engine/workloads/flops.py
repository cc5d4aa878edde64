"""FLOPs per example of a built Keras model, for achieved TFLOP/s and MFU.

FLOPs count the multiply-adds of convolutions, dense layers and LSTM gates (2 FLOPs each);
elementwise work (activations, normalisation, pooling, bias) is left out, as is usual for MFU.
A training step is the forward pass, the weight gradients (same cost) and the input gradients
(same cost), except for layers that come before any trainable variable: nothing needs their
input gradient.
"""

from __future__ import annotations


def layer_forward_flops(layer) -> float:
    """Forward FLOPs of one layer for one example (2 per multiply-add); 0 for elementwise layers."""
    import keras

    if isinstance(layer, keras.layers.Bidirectional):
        return layer_forward_flops_lstm(layer.forward_layer, layer.input.shape) + layer_forward_flops_lstm(
            layer.backward_layer, layer.input.shape
        )
    if isinstance(layer, keras.layers.LSTM):
        return layer_forward_flops_lstm(layer, layer.input.shape)
    if isinstance(layer, keras.layers.DepthwiseConv2D):
        kh, kw = layer.kernel_size
        return 2.0 * _prod(layer.output.shape[1:]) * kh * kw
    if isinstance(layer, keras.layers.Conv2D):
        kh, kw = layer.kernel_size
        in_channels = layer.input.shape[-1] // layer.groups
        return 2.0 * _prod(layer.output.shape[1:]) * kh * kw * in_channels
    if isinstance(layer, keras.layers.Dense):
        return 2.0 * _prod(layer.output.shape[1:]) * layer.input.shape[-1]
    return 0.0


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
    return {"forward": forward, "training": training}


def _prod(values) -> float:
    out = 1.0
    for v in values:
        out *= v
    return out
