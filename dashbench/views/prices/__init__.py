"""The Prices page: its widgets (page), and its tables."""
