"""The store's runs as the predictor reads them: a result's profile (or its FLOPs), the catalog's
chip for its device, one CPU peak per host, and the steps a to-accuracy run took to its target."""

import math

from fixtures.planted_chips import reached_block
from fixtures.stored_runs import SPEC, result_for

from dashbench.predict import measured


def _run(run_id, accelerator, peak, **extra):
    result = result_for(SPEC, 1000.0, accelerator=accelerator, peak_tflops=peak, **extra)
    profile = measured.profile_of(result)
    return {
        "run_id": run_id,
        "host": "h",
        "accelerator": accelerator,
        "accelerator_count": 1.0,
        "step_time_median_s": result["step_time_median_s"],
        "peak_tflops": peak,
        "profile": profile,
        "accuracy": result.get("accuracy"),
    }


def test_an_older_result_is_profiled_by_its_flops_over_its_step():
    profile = measured.profile_of(result_for(SPEC, 1000.0))
    # 1e6 FLOPs an example, 64 examples a step (1000 examples/s × 0.064 s).
    assert profile.flops == 64e6 and profile.batch_size == 64 and profile.precision == "fp32"
    assert measured.profile_of({"examples_per_sec": 5.0}) is None


def test_runs_become_points_on_the_catalogs_chips_and_one_peak_per_host():
    runs = [_run("a", "CPU", 0.1), _run("b", "CPU", 0.3), _run("c", "TPU v6e", None), _run("x", "Nowhere 9", None)]
    runs.append(_run("t", "CPU", 0.2, accuracy=reached_block(300)))
    points = {p.key: p for p in measured.points(runs)}
    assert set(points) == {
        "run:a",
        "run:b",
        "run:c",
    }  # no chip for an unknown device; a to-accuracy run is no step time
    assert points["run:a"].chip.peaks["fp32"] == points["run:b"].chip.peaks["fp32"] == 0.2  # the host's median
    assert points["run:c"].chip.name == "TPU v6e" and points["run:c"].origin == "measured"
    target = measured.steps_to_target(runs, runs[0]["profile"])
    assert target["run_id"] == "t" and math.isclose(target["steps"], 300)
