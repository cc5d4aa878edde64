"""The TensorFlow backend: its measured loop, its training to accuracy, its devices."""
