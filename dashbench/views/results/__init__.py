"""The Results page: its widgets (page), and its table of stored runs and its bundles (runs)."""
