import math
import re
from importlib import resources

import pytest

from dashbench.costs import reference

CONV = "colab-conv2d-tpu-batch-parallel"


def _by_key():
    return reference.rows().set_index("key")


def test_every_row_has_a_source_and_a_date_and_is_marked_reference():
    rows = reference.rows()
    assert rows["key"].is_unique
    for _, row in rows.iterrows():
        assert row["source"].strip(), row["key"]
        assert re.fullmatch(r"\d{4}(-\d{2})?", row["as_of"]), row["key"]
    assert set(rows["kind"]) == {"reference"}


def test_seed_conv_flops():
    # 128 images × 128×128 outputs (stride 2) × 256 filters × 5·5·3 MACs × 2.
    assert reference.conv2d_flops(**reference.SEED_CONV2D) == 2 * 128 * 128 * 128 * 256 * 75
    assert reference.conv2d_flops(1, 5, 5, 1, 1, 5, 1, padding="VALID") == 50


def test_above_peak_flag_on_the_1_22_ms_conv_is_computed():
    rows = _by_key()
    conv = rows.loc[CONV]
    # 8 shards × 80.5 GFLOP in 1.22 ms = 528 TFLOP/s against 4 chips × 45 = 180 TFLOP/s.
    assert conv["peak_tflops"] == pytest.approx(180.0)
    assert conv["achieved_tflops"] == pytest.approx(8 * 80.530636800e9 / 1.22e-3 / 1e12)
    assert "above_peak" in conv["flags"]
    assert conv["mfu"] > 2.9
    for key in ("colab-conv2d-cpu", "colab-conv2d-k80"):
        assert "above_peak" not in rows.loc[key, "flags"]
    assert rows.loc["colab-conv2d-k80", "mfu"] == pytest.approx(80.530636800e9 / 0.280 / 4.37e12)
    # Nothing is typed in: the data file never says "above_peak".
    text = resources.files("dashbench").joinpath("data/reference.csv").read_text(encoding="utf-8")
    assert "above_peak" not in text


def test_the_same_figure_counted_as_one_conv_stays_under_the_peak():
    # The flag follows the arithmetic: one 80.5 GFLOP conv in 1.22 ms is 66 TFLOP/s, below 180.
    raw = reference.data_rows().set_index("key")
    assert raw.loc[CONV, "shards"] == "8"
    row = reference.rows().set_index("key").loc[CONV].to_dict()
    single = reference.flops_per_figure({**row, "shards": None}) / 1.22e-3 / 1e12
    assert single == pytest.approx(66.0, abs=0.1)
    assert single < row["peak_tflops"]


def test_placement_mismatch_on_the_runtime_switched_only_row():
    row = _by_key().loc["colab-conv2d-tpu-runtime-only"]
    assert row["flags"] == ["placement_mismatch"]
    assert row["peak_tflops"] is None or math.isnan(row["peak_tflops"])


def test_examples_per_sec_from_raw_figures():
    rows = _by_key()
    assert rows.loc["colab-conv2d-cpu", "examples_per_sec"] == pytest.approx(128 / 2.44)
    assert rows.loc["colab-conv2d-k80", "examples_per_sec"] == pytest.approx(128 / 0.280)
    assert rows.loc[CONV, "examples_per_sec"] == pytest.approx(128 / 1.22e-3)
    assert rows.loc["colab-fmnist-tpu", "examples_per_sec"] == pytest.approx(5 * 100 * 1024 / 40)
    assert rows.loc["colab-fmnist-tpu", "examples_per_sec_qualifier"] == "~"
    # "over 2 minutes" is an upper bound on the speed.
    assert rows.loc["colab-fmnist-k80", "examples_per_sec"] == pytest.approx(5 * 100 * 1024 / 120)
    assert rows.loc["colab-fmnist-k80", "examples_per_sec_qualifier"] == "<"
    assert rows.loc["riseml-bilstm-p100", "examples_per_sec"] == 1658
    assert rows.loc["riseml-apr-resnet50-tpu-bf16", "usd_per_million_examples"] == pytest.approx(
        6.7 / (3186 * 3600) * 1e6
    )


def test_ratios_are_computed_from_raw_figures_next_to_the_claim():
    ratios = reference.ratios().set_index("key")
    p100 = ratios.loc["riseml-bilstm-tpu-vs-p100"]
    assert p100["ratio_claimed"] == 16.9
    assert p100["ratio_computed"] == pytest.approx(21402 / 1658)
    assert round(p100["ratio"], 1) == 12.9
    assert p100["claim_differs"]
    v100 = ratios.loc["riseml-bilstm-tpu-vs-v100"]
    assert round(v100["ratio_computed"], 1) == 7.7 and not v100["claim_differs"]
    fmnist = ratios.loc["colab-fmnist-tpu-vs-k80"]
    assert fmnist["ratio_computed"] == pytest.approx(3.0) and fmnist["ratio_qualifier"] == "~"


def test_ratio_only_rows_stay_ratios():
    rows = _by_key()
    for key, claimed in (
        ("riseml-resnet50-tpu-vs-p100", 8.4),
        ("riseml-resnet50-tpu-vs-v100", 5.1),
        ("riseml-inceptionv3-tpu-vs-p100", 8.4),
        ("riseml-inceptionv3-tpu-vs-v100", 4.8),
    ):
        row = rows.loc[key]
        assert row["ratio"] == claimed and row["figure_unit"] == "×"
        assert math.isnan(row["examples_per_sec"])
        assert row["ratio_computed"] is None or math.isnan(row["ratio_computed"])


def test_reported_convergence_failure_is_kept():
    assert "loss_not_falling" in _by_key().loc["riseml-bilstm-tpu", "flags"]


def test_unknown_row():
    with pytest.raises(KeyError):
        reference.get("nope")
