"""The store's schema steps, one alembic revision a file (NNNN_*.py: schema vNNNN); see the package above."""
