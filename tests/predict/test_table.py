"""One prediction per device, priced from the price catalog, and its words; planted chips."""

import math

from fixtures.planted_chips import Chip, Profile

from dashbench.predict import words
from dashbench.predict.calibration import Calibration, Point
from dashbench.predict.table import cheapest_to_target, rows


def _calib():
    profile = Profile(bytes_accessed=None)
    # Ideal 10 s on the planted chip; measured 20 s and 25 s: efficiencies 0.5 and 0.4.
    return Calibration(Point(k, profile, Chip(), 1, "bf16", s, "published") for k, s in (("a", 20.0), ("b", 25.0)))


def test_a_device_is_priced_by_its_family_and_costs_follow_the_predicted_throughput():
    v6e = Chip(name="TPU v6e", family="TPU v6e")
    (row,) = rows(Profile(), [v6e], 1, _calib())
    # Median efficiency 0.45: 1e15 / (100e12 × 0.45) = 22.2 s for 8 × 1000 tokens.
    assert math.isclose(row["step_s"], 10 / 0.45)
    assert row["price_key"] == "gcp-tpu-v6e" and row["usd_per_hour"] == 2.70
    assert math.isclose(row["usd_per_million"], 2.70 / (row["throughput"] * 3600) * 1e6)
    assert math.isclose(row["usd_per_million_spot"], 0.648 / (row["throughput"] * 3600) * 1e6)
    # Leave-one-out: a predicted from b (eff 0.4) reads 25 s against 20 s (+25%); b from a −20%.
    assert math.isclose(row["step_low_s"], row["step_s"] / 1.25) and math.isclose(
        row["step_high_s"], row["step_s"] / 0.8
    )
    assert row["measured_throughput"] is None and row["kind"] == "prediction"
    assert cheapest_to_target([row]) is None


def test_a_device_without_the_precision_is_left_out_and_one_without_a_price_says_so():
    gpu = Chip(name="Planted GPU", family="Planted GPU", kind="gpu", peaks={"fp32": 10.0})
    v6e = Chip(name="TPU v6e", family="TPU v6e")
    out = rows(Profile(), [gpu, v6e], 1, _calib())
    assert [r["device"] for r in out] == ["TPU v6e"]
    (alone,) = rows(Profile(precision="fp32"), [gpu], 1, _calib())
    assert alone["price_note"] == "no price" and alone["usd_per_million"] is None
    assert "nothing calibrates LM workloads on NVIDIA" in alone["band_note"]


def test_the_table_labels_predictions_and_fits_a_narrow_terminal():
    out = rows(Profile(), [Chip(name="TPU v6e", family="TPU v6e")], 4, _calib())
    text = words.format_table(out)
    assert "≈ tokens/s per chip (predicted)" in text and "Predicted, not measured" in text
    assert "TPU v6e ×4" in text
    narrow = words.format_table(out, width=60)
    assert all(len(line) <= 60 for line in narrow.splitlines())
    assert "left out to fit 60 characters" in narrow
