import hashlib
import re
from importlib import resources

import pandas as pd
import pytest

from dashbench.core.spec import RunSpec, SpecError
from dashbench.costs import prices, run_cost
from dashbench.store import Store

PRICES = resources.files("dashbench").joinpath("data/prices.csv")


def _digest() -> str:
    return hashlib.sha256(PRICES.read_bytes()).hexdigest()


def test_every_shipped_price_has_a_source_and_a_date():
    raw = pd.read_csv(PRICES.open("r", encoding="utf-8"), dtype=str, keep_default_na=False)
    assert len(raw) >= 20
    for _, row in raw.iterrows():
        assert row["source"].strip(), f"{row['key']} has no source"
        assert re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", row["as_of"]), f"{row['key']} has no as-of date"
        assert row["unconfirmed"] in ("true", "false"), f"{row['key']}: unconfirmed must be true or false"
        assert row["unit"] in prices.UNITS, row["key"]
    assert raw["key"].is_unique


def test_ranges_are_unconfirmed_lower_bounds_with_the_range_kept():
    cat = prices.catalog()
    h100 = cat.set_index("key").loc["gcp-h100-80gb"]
    assert h100["unconfirmed"] and h100["on_demand_usd_per_hour"] == 4.20 and "4.20–9.80" in h100["note"]
    p3 = cat.set_index("key").loc["aws-p3.2xlarge"]
    assert p3["unconfirmed"] and p3["spot_usd_per_hour"] == 0.52 and "0.52–0.77" in p3["note"]
    assert not cat.set_index("key").loc["gcp-v100"]["unconfirmed"]
    assert set(cat["origin"]) == {"shipped"}


def test_per_chip_price_times_chips_on_a_multi_chip_device():
    price = run_cost.match_price("TPU v4", 8, prices.catalog())
    assert price["key"] == "gcp-tpu-v4"
    assert price["usd_per_hour"] == pytest.approx(8 * 3.22)
    assert price["usd_per_hour_spot"] == pytest.approx(8 * 0.92)


@pytest.mark.parametrize("chips, boards", [(4, 1), (2, 1), (8, 2)])
def test_board_price_bills_whole_boards(chips, boards):
    # A TPU v2-8 board holds 4 chips: the newest board-hour row wins over the 2018 launch price.
    price = run_cost.match_price("TPU v2", chips, prices.catalog())
    assert price["key"] == "gcp-tpu-v2-8"
    assert price["units"] == boards
    assert price["usd_per_hour"] == pytest.approx(boards * 4.50)
    assert price["usd_per_hour_spot"] == pytest.approx(boards * 1.35)


def test_cost_columns_on_hand_computed_runs():
    runs = pd.DataFrame(
        [
            {"run_id": "a", "accelerator": "TPU v4", "accelerator_count": 8.0, "examples_per_sec": 1000.0},
            {"run_id": "b", "accelerator": "V100", "accelerator_count": 1.0, "examples_per_sec": 500.0},
            {"run_id": "c", "accelerator": "TPU v2", "accelerator_count": 4.0, "examples_per_sec": 2000.0},
            {"run_id": "d", "accelerator": "Gaudi2", "accelerator_count": 1.0, "examples_per_sec": 10.0},
            {"run_id": "e", "accelerator": "CPU", "accelerator_count": 1.0, "examples_per_sec": 10.0},
            {"run_id": "f", "accelerator": None, "accelerator_count": float("nan"), "examples_per_sec": float("nan")},
        ]
    )
    out = run_cost.add_cost_columns(runs, prices.catalog()).set_index("run_id")
    # 8 chips × $3.22 = $25.76/h; 1000 ex/s = 3.6 M ex/h.
    assert out.loc["a", "usd_per_hour"] == pytest.approx(25.76)
    assert out.loc["a", "usd_per_million_examples"] == pytest.approx(25.76 / 3.6)
    assert out.loc["a", "examples_per_usd"] == pytest.approx(3.6e6 / 25.76)
    assert out.loc["a", "usd_per_million_examples_spot"] == pytest.approx(8 * 0.92 / 3.6)
    assert out.loc["a", "examples_per_usd_spot"] == pytest.approx(3.6e6 / (8 * 0.92))
    # $2.48/h at 1.8 M ex/h.
    assert out.loc["b", "usd_per_million_examples"] == pytest.approx(2.48 / 1.8)
    assert out.loc["b", "price_key"] == "gcp-v100"
    # One board: $4.50/h at 7.2 M ex/h.
    assert out.loc["c", "usd_per_million_examples"] == pytest.approx(4.50 / 7.2)
    assert out.loc["c", "price_note"] == "1 board of 4 chips for 4 chips"
    for run_id in ("d", "e", "f"):
        assert out.loc[run_id, "price_note"] == prices.NO_PRICE
        assert pd.isna(out.loc[run_id, "usd_per_million_examples"])
    assert list(runs.columns) == ["run_id", "accelerator", "accelerator_count", "examples_per_sec"]


def test_epochs_cost_on_demand_and_spot():
    price = run_cost.match_price("TPU v2", 4, prices.catalog())
    # 60,000 examples × 5 epochs at 1,000 ex/s = 300 s = 1/12 h.
    cost = run_cost.epochs_cost(1000.0, 60_000, 5, price)
    assert cost["seconds"] == pytest.approx(300.0)
    assert cost["usd_on_demand"] == pytest.approx(4.50 / 12)
    assert cost["usd_spot"] == pytest.approx(1.35 / 12)
    historical = run_cost.match_price("TPU v2", 4, prices.catalog()[lambda c: c["key"] == "gcp-cloud-tpu-v2-2018"])
    assert run_cost.epochs_cost(1000.0, 60_000, 5, historical)["usd_spot"] is None
    assert run_cost.epochs_cost(1000.0, 60_000, 5, None)["usd_on_demand"] is None
    with pytest.raises(SpecError) as info:
        run_cost.epochs_cost(0, 60_000, 5, price)
    assert info.value.field == "examples_per_sec"


def _finished_run(store: Store, accelerator: str, count: int, eps: float) -> str:
    run_id = store.create_run(RunSpec(model="conv2d", batch_size=8, device="gpu"))
    store.finish_run(
        run_id,
        "done",
        result={"accelerator": accelerator, "accelerator_count": count, "examples_per_sec": eps, "device": "gpu"},
    )
    return run_id


def test_overrides_in_a_real_store_reprice_history_and_leave_the_shipped_file(tmp_path):
    before = _digest()
    with Store(tmp_path / "results.sqlite") as store:
        run_id = _finished_run(store, "V100", 2, 1000.0)
        priced = run_cost.add_cost_columns(store.runs(), prices.catalog(store)).set_index("run_id")
        assert priced.loc[run_id, "usd_per_hour"] == pytest.approx(2 * 2.48)

        current = prices.catalog(store)
        row = prices.override_row("v100", "GPU-hour", 1.80, spot=0.5, provider="GCP", current=current)
        assert row["key"] == "gcp-v100"  # same device, unit and provider: overrides the shipped row
        store.set_price_override(prices.store_row(row))

        merged = prices.catalog(store)
        assert (merged["key"] == "gcp-v100").sum() == 1
        assert merged.set_index("key").loc["gcp-v100", "origin"] == "override"
        assert len(merged) == len(prices.shipped_catalog())
        repriced = run_cost.add_cost_columns(store.runs(), merged).set_index("run_id")
        assert repriced.loc[run_id, "usd_per_hour"] == pytest.approx(3.60)
        assert repriced.loc[run_id, "usd_per_million_examples_spot"] == pytest.approx(1.0 / 3.6)
        assert "your price" in repriced.loc[run_id, "price_note"]

        store.reset_price_overrides()
        assert prices.catalog(store).set_index("key").loc["gcp-v100", "on_demand_usd_per_hour"] == 2.48
    assert _digest() == before


def test_cpu_is_priced_only_through_a_this_machine_override(tmp_path):
    with Store(tmp_path / "results.sqlite") as store:
        assert run_cost.match_price("CPU", 1, prices.catalog(store)) is None
        store.set_price_override(prices.store_row(prices.override_row("CPU", "hour", 0.10)))
        price = run_cost.match_price("CPU", 1, prices.catalog(store))
    assert price["provider"] == "this machine"
    assert price["usd_per_hour"] == pytest.approx(0.10)
    # A shipped CPU VM row never prices a CPU run.
    assert run_cost.match_price("c5.4xlarge", 1, prices.catalog())["key"] == "aws-c5.4xlarge"


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"unit": "day"}, "unit"),
        ({"on_demand": "cheap"}, "on_demand_usd_per_hour"),
        ({"on_demand": -1}, "on_demand_usd_per_hour"),
        ({"spot": "x"}, "spot_usd_per_hour"),
        ({"chips": 0}, "chips_per_unit"),
        ({"device": " "}, "device"),
    ],
)
def test_bad_override_names_the_field(changes, field):
    values = {"device": "V100", "unit": "GPU-hour", "on_demand": 1.0, **changes}
    with pytest.raises(SpecError) as info:
        prices.override_row(**values)
    assert info.value.field == field


def test_a_cpu_run_is_priced_per_vcpu_of_its_host_until_this_machine_has_a_price(tmp_path):
    from dashbench.store import Store

    runs = pd.DataFrame(
        [
            {
                "run_id": "eight",
                "accelerator": "CPU",
                "accelerator_count": 1.0,
                "examples_per_sec": 100.0,
                "host_cpus": 8.0,
            },
            {
                "run_id": "unknown",
                "accelerator": "CPU",
                "accelerator_count": 1.0,
                "examples_per_sec": 100.0,
                "host_cpus": float("nan"),
            },
            {
                "run_id": "gpu",
                "accelerator": "V100",
                "accelerator_count": 1.0,
                "examples_per_sec": 100.0,
                "host_cpus": 8.0,
            },
        ]
    )
    out = run_cost.add_cost_columns(runs, prices.catalog()).set_index("run_id")
    # The confirmed GCP row (n2d-highcpu-16's $0.499/h over 16 vCPUs) before the unconfirmed AWS one.
    assert out.loc["eight", "price_key"] == "gcp-n2d-per-vcpu"
    assert out.loc["eight", "usd_per_hour"] == pytest.approx(8 * 0.0312)
    assert out.loc["eight", "usd_per_million_examples"] == pytest.approx(8 * 0.0312 / 0.36)
    assert "8 vCPUs" in out.loc["eight", "price_note"]
    assert out.loc["unknown", "price_note"] == prices.NO_PRICE  # no CPU count recorded: no guess
    assert out.loc["gpu", "price_key"] == "gcp-v100"  # the host's CPUs price nothing else
    with Store(tmp_path / "runs.sqlite") as store:
        store.set_price_override(prices.store_row(prices.override_row("CPU", "hour", 0.50)))
        mine = run_cost.add_cost_columns(runs, prices.catalog(store)).set_index("run_id")
    assert mine.loc["eight", "usd_per_hour"] == pytest.approx(0.50) and "your price" in mine.loc["eight", "price_note"]
    assert mine.loc["unknown", "usd_per_hour"] == pytest.approx(0.50)
    with Store(tmp_path / "per-vcpu.sqlite") as store:  # your own price per vCPU: × the host's CPUs too
        store.set_price_override(prices.store_row(prices.override_row("CPU", "vCPU-hour", 0.05)))
        per_vcpu = run_cost.add_cost_columns(runs, prices.catalog(store)).set_index("run_id")
    assert per_vcpu.loc["eight", "usd_per_hour"] == pytest.approx(8 * 0.05)
    assert per_vcpu.loc["unknown", "price_note"] == prices.NO_PRICE
