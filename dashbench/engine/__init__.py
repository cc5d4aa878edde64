"""The measuring side: everything that imports TensorFlow, Keras or JAX, and only ever inside a run's
own process. One folder per backend (tensorflow/, jax/: the measured loop, training to accuracy,
devices) behind one interface (base.Backend, found by name in backends); beside them what every
backend shares: the workloads' models, synthetic batches and FLOPs, the environment record, the
measured result, the probes and the doctor."""
