"""bench/parity_tolerance.py's counting, without training (the script runs the engine on both backends)."""

import math

from fixtures import bench_scripts
from fixtures.parity_runs import throughput_run


def test_false_alarms_and_detections_are_counted_over_every_reference_subset():
    bench = bench_scripts.load("parity_tolerance")
    runs = {}
    for seed in range(3):
        for backend, shift in (("tensorflow", 0.0), ("jax", 0.04)):
            losses = [3.0 + 0.1 * seed + shift + 0.03 * (-1) ** i - 0.1 * i for i in range(8)]
            runs[(backend, seed)] = throughput_run(f"{backend}-{seed}", backend, seed, losses)
    for seed in range(2):
        runs[("broken", seed)] = throughput_run(f"broken-{seed}", "broken", seed, [3.0 + 2 * i for i in range(8)])
    alarms, pairs, found, broken = bench.judge(runs, [0, 1, 2], 3.0)
    # Either backend as the reference: 3 subsets of two seeds (2 pairs each) and 1 of three (3 pairs).
    assert (alarms, pairs) == (0, 2 * (3 * 2 + 3))
    # Broken seeds 0 and 1 against TensorFlow's subsets holding them: (0,1) twice, (0,2), (1,2), (0,1,2) twice.
    assert (found, broken) == (6, 6)
    assert bench.judge(runs, [0, 1, 2], 0.01)[0] > 0  # a tolerance far below the seeds' spread: alarms
    assert math.isclose(bench.KS[1], 3.0)
