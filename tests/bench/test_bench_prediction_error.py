"""bench/prediction_error.py's leave-one-out and its block, on planted points (the script itself
runs real CPU workloads and reads the shipped calibration rows)."""

import math

from fixtures import bench_scripts
from fixtures.planted_chips import Chip, Profile

from dashbench.predict.calibration import Calibration, Point


def test_each_point_is_predicted_from_the_others_and_summarised_per_family():
    bench = bench_scripts.load("prediction_error")
    profile = Profile(bytes_accessed=None)  # ideal 10 s on the planted chip
    gpu = Chip(name="G", family="G", kind="gpu")
    calib = Calibration(
        [
            Point("t1", profile, Chip(), 1, "bf16", 20.0, "published"),
            Point("t2", profile, Chip(), 1, "bf16", 25.0, "published"),
            Point("g1", profile, gpu, 1, "bf16", 40.0, "published"),  # alone: borrows TPU LM's fit
        ]
    )
    rows = {r["key"]: r for r in bench.leave_one_out(calib)}
    assert math.isclose(rows["t1"]["error"], 25.0 / 20.0 - 1) and math.isclose(rows["t2"]["error"], 20.0 / 25.0 - 1)
    # Borrowed from the LM kind on other families: median of 0.5 and 0.4 is 0.45, so 22.2 s against 40.
    assert math.isclose(rows["g1"]["predicted_s"], 10 / 0.45)
    s = bench.summary([r["error"] for r in rows.values()])
    assert s["n"] == 3 and math.isclose(s["worst"], 1 - 10 / 0.45 / 40)
    text = bench.render({"rows": list(rows.values()), "families": {"TPU": s}, "excluded": [("x", "why")]}, None)
    assert "| TPU | 3 |" in text and "`x` (why)" in text
