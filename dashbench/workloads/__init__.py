"""What can be measured, without importing a framework: the workload catalog, a Llama-style LM's
shape, a user's model file (never imported here), Fashion-MNIST files, the memory estimate, presets."""
