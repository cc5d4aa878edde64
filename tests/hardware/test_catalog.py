"""The hardware catalog: every chip of the shared figures, dense, named by variant, sourced and dated;
MFU, device discovery and prices read it by the names they use."""

import csv
import re

import pytest

from dashbench.costs import prices, run_cost
from dashbench.engine.target import canonical_gpu
from dashbench.hardware import catalog, peaks

ROWS = {
    "TPU v2", "TPU v3", "TPU v4", "TPU v5e", "TPU v5p", "TPU v6e", "TPU7x", "K80", "P100 SXM2", "P100 PCIe",
    "V100 SXM2", "T4", "L4", "A100 SXM 40GB", "A100 SXM 80GB", "H100 SXM", "H100 PCIe", "H200 SXM", "B200",
    "GB200", "MI300X",
}  # fmt: skip
# Dense figures (TFLOP/s, per chip) from the shared figures; the sparse ones are twice these.
DENSE = {
    ("H100 SXM", "bf16"): 989, ("H100 SXM", "fp8"): 1979, ("H100 PCIe", "bf16"): 756, ("H200 SXM", "bf16"): 989,
    ("B200", "bf16"): 2250, ("B200", "fp8"): 4500, ("GB200", "bf16"): 2500, ("MI300X", "bf16"): 1307.4,
    ("TPU7x", "bf16"): 2307, ("TPU7x", "fp8"): 4614, ("TPU v6e", "bf16"): 918, ("A100 SXM 80GB", "tf32"): 156,
    ("L4", "bf16"): 121, ("V100 SXM2", "fp16"): 125,
}  # fmt: skip


def test_every_chip_of_the_figures_has_one_row_named_by_its_variant():
    names = catalog.names()
    assert len(names) == len(set(names)) and set(names) >= ROWS
    assert "H100" not in names and "A100" not in names and "H200" not in names  # a bare family is not a row
    for chip in catalog.chips():
        assert chip.kind in ("tpu", "gpu") and chip.memory_gb > 0 and chip.memory_bw_gbs > 0, chip.name
        assert set(chip.peaks) <= set(catalog.PRECISIONS) and chip.peaks, chip.name


def test_every_row_is_sourced_and_dated():
    with open(catalog.HARDWARE_CSV, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        assert row["source"].strip() and re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", row["as_of"]), row["name"]
    # A figure the shared notes give only approximately says so in its row.
    assert catalog.get("TPU7x").unconfirmed and catalog.get("B200").unconfirmed
    assert not catalog.get("H100 SXM").unconfirmed


@pytest.mark.parametrize(("name", "precision"), sorted(DENSE))
def test_peaks_are_dense_not_sparse(name, precision):
    assert catalog.peak(catalog.get(name), precision) == DENSE[name, precision]


def test_no_row_holds_a_sparse_figure():
    # The largest dense bf16 in the figures is GB200's 2,500; a sparse B200/GB200 figure would be above it.
    for chip in catalog.chips():
        assert chip.peaks.get("bf16", 0) <= 2500, chip.name
        assert chip.peaks.get("fp8", 0) <= 2.01 * chip.peaks.get("bf16", 0), chip.name  # L4: 242.5 vs 121
        assert chip.peaks.get("tf32", 0) <= 0.51 * chip.peaks.get("bf16", 0), chip.name


def test_precisions_a_chip_lacks_are_absent():
    assert catalog.peak(catalog.get("V100"), "fp8") is None and catalog.peak(catalog.get("V100"), "bf16") is None
    assert catalog.peak(catalog.get("K80"), "fp16") is None
    assert catalog.peak(catalog.get("TPU v4"), "fp32") == 275  # fp32 matmuls run as bf16 passes on a TPU
    assert catalog.peak(catalog.get("H100"), "mixed_bfloat16") == 989  # a run's precision names work too
    with pytest.raises(ValueError, match="^precision: unknown 'fp4'"):
        catalog.peak(catalog.get("H100"), "fp4")


def test_a_family_name_selects_its_variants_and_get_gives_the_default():
    assert [c.name for c in catalog.select(["h100"])] == ["H100 SXM", "H100 PCIe"]
    assert [c.name for c in catalog.select(["TPU v6e", "H100 PCIe"])] == ["TPU v6e", "H100 PCIe"]
    assert catalog.get("H100").name == "H100 SXM" and catalog.get("tpu V6E").name == "TPU v6e"
    assert catalog.get("A100").memory_gb == 40  # the part the price catalog's A100 rows are for
    with pytest.raises(LookupError) as raised:
        catalog.get("H800")
    assert str(raised.value).startswith("device: unknown 'H800'; known: ") and "\n" not in str(raised.value)


def test_price_catalog_devices_are_catalog_families():
    accelerators = set(prices.CANONICAL_ACCELERATORS) - {"CPU"}
    assert accelerators <= set(catalog.families())


def test_device_discovery_names_map_to_rows():
    assert canonical_gpu("NVIDIA H100 80GB HBM3") == "H100" and catalog.resolve("H100").name == "H100 SXM"
    assert canonical_gpu("NVIDIA H100 PCIe") == "H100 PCIe"
    assert canonical_gpu("Tesla P100-PCIE-16GB") == "P100 PCIe"
    assert canonical_gpu("NVIDIA B200") == "B200" and canonical_gpu("NVIDIA GB200") == "GB200"
    assert canonical_gpu("NVIDIA L40S") == "NVIDIA L40S"  # not an L4
    assert catalog.resolve("NVIDIA A100-SXM4-80GB").name == "A100 SXM 80GB"
    assert catalog.resolve("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert peaks.datasheet_peak_tflops("H100 PCIe", "float32", tf32=True) == 378
    assert peaks.peak_source("H100 PCIe") == "datasheet"


def test_a_variant_without_its_own_price_is_priced_by_its_family():
    shipped = prices.shipped_catalog()
    assert run_cost.match_price("H100 PCIe", 1, shipped)["device"] == "H100"
    assert run_cost.match_price("H100", 1, shipped)["device"] == "H100"
