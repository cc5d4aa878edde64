"""What can be measured, without importing a framework: each workload's registry entry (its one home)
and a spec's checks, a Llama-style LM's shape, a user's model file (never imported here), Fashion-MNIST
files, the memory estimate, presets."""
