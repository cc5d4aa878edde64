"""Runs as processes: the queue the dashboard and `sweep` use (queue.py), and one run's lifecycle in
the store, inside its own process (runner.py)."""
