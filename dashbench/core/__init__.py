"""The floor every part stands on: the RunSpec (what to measure, with its field checks), step-time
statistics, a to-accuracy result's shape, and reading a pandas frame. Nothing here imports dashbench."""
