"""The JAX backend (Keras on JAX): its measured loop, its training to accuracy, its devices, its seeding."""
