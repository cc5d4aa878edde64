"""A small Vision Transformer (Dosovitskiy et al., 2021): patches, a learned position embedding,
pre-norm encoder blocks of multi-head attention and an MLP, mean-pooled into class logits.

    python -m dashbench run --model examples/models/vit.py:build --batch-size 32 --device cpu

It is compiled, so dashbench uses its loss and optimizer (AdamW here). Its input is a square RGB
image, so it also trains to accuracy on an image folder (--data folder): `build(classes=...)` takes
the folder's class count.
"""

import keras
from keras import layers

IMAGE, PATCH, WIDTH, DEPTH, HEADS, MLP = 64, 8, 128, 4, 4, 256


def vit(image=IMAGE, patch=PATCH, width=WIDTH, depth=DEPTH, heads=HEADS, mlp=MLP, classes=10):
    inputs = keras.Input((image, image, 3), name="image")
    x = layers.Conv2D(width, patch, strides=patch, name="patches")(inputs)  # one token per patch
    tokens = (image // patch) ** 2
    x = layers.Reshape((tokens, width))(x)
    x = x + layers.Embedding(tokens, width, name="position")(keras.ops.arange(tokens))
    for _ in range(depth):
        h = layers.LayerNormalization(epsilon=1e-6)(x)
        x = x + layers.MultiHeadAttention(heads, width // heads)(h, h)
        h = layers.LayerNormalization(epsilon=1e-6)(x)
        x = x + layers.Dense(width)(layers.Dense(mlp, activation="gelu")(h))
    x = layers.GlobalAveragePooling1D()(layers.LayerNormalization(epsilon=1e-6)(x))
    model = keras.Model(inputs, layers.Dense(classes, name="logits")(x), name="vit")
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=1e-3, weight_decay=1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def build(classes=10):
    return vit(classes=classes)


def build_tiny(classes=4):
    """Two blocks over 16×16 images: seconds on a CPU (the tests use it)."""
    return vit(image=16, patch=4, width=32, depth=2, heads=2, mlp=64, classes=classes)
