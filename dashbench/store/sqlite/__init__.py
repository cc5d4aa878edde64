"""The store in an SQLite file (the embedded default): its backend (backend.py) and its SQL words (dialect.py)."""
