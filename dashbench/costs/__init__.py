"""The money side: the price catalog and cost metrics (prices.py) and the published reference
figures (reference.py). No TensorFlow."""
