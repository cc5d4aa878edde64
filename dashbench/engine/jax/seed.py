"""Seeding a JAX run's Keras without importing TensorFlow.

`keras.utils.set_random_seed` also seeds TensorFlow whenever it is installed, and to do so imports
it: seconds of CPU and hundreds of MiB in every JAX run process that has TensorFlow beside it,
for a seed nothing there uses (the JAX loops feed batches from numpy, never tf.data).
"""

from __future__ import annotations


def set_random_seed(seed: int) -> None:
    """What keras.utils.set_random_seed does on the JAX backend, less the TensorFlow seed: Python's
    and numpy's seeds, and Keras's global seed with its global SeedGenerator dropped (so the next
    model's weights come from `seed`)."""
    import random

    import keras
    import numpy as np

    try:
        from keras.src.backend.common import global_state
        from keras.src.random import seed_generator
        from keras.src.utils import rng_utils

        seed_key, generator_key = rng_utils.GLOBAL_RANDOM_SEED, seed_generator.GLOBAL_SEED_GENERATOR
    except (ImportError, AttributeError):  # another Keras layout: its own function, TensorFlow and all
        keras.utils.set_random_seed(seed)
        return
    if not isinstance(seed, int):
        raise ValueError(f"seed: must be an integer, got {seed!r}")
    global_state.set_global_attribute(seed_key, seed)
    global_state.set_global_attribute(generator_key, None)
    random.seed(seed)
    np.random.seed(seed)
