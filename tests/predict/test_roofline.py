"""The roofline on planted chips with round numbers: every answer below is worked out by hand."""

import math

import pytest
from fixtures.planted_chips import Chip, Profile

from dashbench.predict.calibration import Calibration, Point
from dashbench.predict.roofline import Efficiency, PredictError, band, chip_precision, predict


def test_one_chip_compute_bound_at_half_efficiency():
    # 1e15 FLOP on 100 TFLOP/s at 50%: 20 s; 1e11 bytes on 1000 GB/s at 50%: 0.2 s; one chip: no link.
    p = predict(Profile(), Chip(), 1, Efficiency(compute=0.5))
    assert p.bound == "compute"
    assert math.isclose(p.step_s, 20.0)
    assert math.isclose(p.memory_s, 0.2)
    assert p.communication_s == 0.0
    assert math.isclose(p.throughput, 8 * 1000 / 20.0)  # tokens: 8 sequences of 1000
    assert math.isclose(p.mfu, 0.5)
    assert p.step_low_s is None and p.band_note == ""


def test_many_chips_communication_bound_with_a_ring_all_reduce():
    # 4 chips: compute 1e15 / (4 × 100e12) = 2.5 s at full efficiency; ring: 2·3/4 × 4e9 / 100e9 = 0.06 s.
    # A tiny step (1e12 FLOP) on 4 chips: compute 0.0025 s < ring 0.06 s.
    p = predict(Profile(flops=1e12, bytes_accessed=None), Chip(), 4, Efficiency(compute=1.0))
    assert p.bound == "communication"
    assert math.isclose(p.communication_s, 0.06)
    assert math.isclose(p.step_s, 0.06)
    assert math.isclose(p.throughput_per_chip, 8000 / 0.06 / 4)


def test_memory_bound_and_overhead_added():
    p = predict(Profile(flops=1e12, bytes_accessed=1e12), Chip(), 1, Efficiency(compute=1.0, overhead_s=0.5))
    assert p.bound == "memory"
    assert math.isclose(p.step_s, 0.5 + 1.0)  # 1e12 bytes at 1000 GB/s


def test_precisions_map_to_what_the_chip_computes_at():
    gpu = Chip(name="G", kind="gpu", peaks={"fp32": 10.0, "tf32": 80.0, "fp16": 160.0})
    assert chip_precision(gpu, "float32") == "tf32"
    assert chip_precision(Chip(), "fp32") == "bf16"  # a TPU's float32 runs in bf16 passes
    with pytest.raises(PredictError, match="^precision: G has no fp8 peak; it has: fp32, tf32, fp16$"):
        chip_precision(gpu, "fp8")
    with pytest.raises(PredictError, match="^chips: must be an integer >= 1, got 0$"):
        predict(Profile(), Chip(), 0, Efficiency(compute=1.0))


def test_band_holds_the_prediction_and_reads_the_errors_as_truth():
    # Predictions seen 25% too high and 20% too low: the truth is step / 1.25 … step / 0.8.
    assert band(10.0, (0.25, -0.2)) == (8.0, 12.5)
    assert band(10.0, (0.25, 0.1)) == (8.0, 10.0)
    assert band(10.0, ()) == (None, None)


def _point(key, efficiency, model="llama", chip=None):
    chip = chip or Chip()
    profile = Profile(model=model, bytes_accessed=None)
    return Point(key, profile, chip, 1, "bf16", 10.0 / efficiency, "published")  # ideal 10 s


def test_a_group_is_fitted_to_its_median_and_banded_by_leave_one_out():
    calib = Calibration([_point("a", 0.4), _point("b", 0.5), _point("c", 0.6)])
    eff = calib.efficiency(Profile(), Chip())
    assert math.isclose(eff.compute, 0.5)
    # Leaving a out: median(0.5, 0.6) = 0.55, predicted 10/0.55 against 25 → 0.4/0.55 − 1.
    errors = dict((p.key, e) for p, e in calib.leave_one_out())
    assert math.isclose(errors["a"], 0.4 / 0.55 - 1)
    assert math.isclose(errors["c"], 0.6 / 0.45 - 1)
    assert eff.errors and "fitted to 3 published points (TPU LM)" in eff.source


def test_nothing_to_calibrate_says_so_and_gives_no_band():
    other = Chip(name="Planted GPU", family="Planted GPU", kind="gpu")
    calib = Calibration([_point("a", 0.4), _point("b", 0.5)])
    eff = calib.efficiency(Profile(), other)
    assert eff.errors == () and "nothing calibrates LM workloads on NVIDIA" in eff.no_band
    assert "borrowed" in eff.source
    p = predict(Profile(), other, 1, calib)
    assert p.step_low_s is None and p.throughput_low is None
    empty = Calibration().efficiency(Profile(), Chip())
    assert empty.source == "assumed" and "nothing calibrates TPU" in empty.no_band
    one = Calibration([_point("a", 0.4)]).efficiency(Profile(), Chip())
    assert one.errors == () and "1 point calibrate" in one.no_band


def test_measured_runs_fit_an_overhead():
    runs = [
        Point(
            f"r{i}",
            Profile(model="m.py:build", unit="examples", flops=f, bytes_accessed=None),
            Chip(),
            1,
            "bf16",
            0.1 + f / 100e12 / 0.5,
            "measured",
        )
        for i, f in enumerate((1e12, 2e12, 4e12))
    ]
    eff = Calibration(runs).efficiency(Profile(model="other.py:build", unit="examples"), Chip())
    assert math.isclose(eff.overhead_s, 0.1) and math.isclose(eff.compute, 0.5)
