"""The measuring side: everything that imports TensorFlow or Keras, and only ever inside a run's own
process — the measured loop, devices and their strategies, the environment record, the workloads'
models, synthetic batches and FLOPs."""
