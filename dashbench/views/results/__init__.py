"""The Results page: its widgets (page), and its table, run detail and bundles (runs)."""
