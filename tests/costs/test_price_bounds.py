"""A price is bounded like every other number: finite, 0 to MAX_USD_PER_HOUR, -0 read as 0; its
text fields are one short line; a spot price above on-demand is stored with a warning. A stored
override that breaks the bounds (an older version's) is left out of the catalog and named, never
overflowing a cost to null in silence."""

import json
import sqlite3

import pytest

from dashbench.cli import main
from dashbench.core.spec import SpecError
from dashbench.costs import prices, run_cost
from dashbench.store import Store

SET = ["prices", "set", "--device", "V100", "--unit", "GPU-hour"]


def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "argv, field, says",
    [
        (["--on-demand", "1.7e308"], "on_demand_usd_per_hour", f"0 to {prices.MAX_USD_PER_HOUR}"),
        (["--on-demand", "1000001"], "on_demand_usd_per_hour", f"0 to {prices.MAX_USD_PER_HOUR}"),
        (["--on-demand", "inf"], "on_demand_usd_per_hour", "finite"),
        (["--on-demand", "1", "--spot", "2e6"], "spot_usd_per_hour", f"0 to {prices.MAX_USD_PER_HOUR}"),
        (["--on-demand", "9" * 5000], "on_demand_usd_per_hour", "characters"),
        (["--on-demand", "1", "--key", "k" * 100_000], "key", f"at most {prices.MAX_TEXT} characters"),
        (["--on-demand", "1", "--key", "a\nb"], "key", "control characters"),
        (["--on-demand", "1", "--provider", "x\x1b[31m"], "provider", "control characters"),
        (["--on-demand", "1", "--source", "s" * 201], "source", f"at most {prices.MAX_TEXT} characters"),
        (["--on-demand", "1", "--region", "\x00"], "region", "control characters"),
        (["--on-demand", "1", "--chips", "9" * 5000], "chips_per_unit", "characters"),
    ],
)
def test_out_of_bounds_prices_and_text_are_one_line_and_store_nothing(argv, field, says, tmp_path, capsys):
    db = tmp_path / "p.sqlite"
    code, out, err = cli(capsys, *SET, *argv, "--db", str(db))
    assert code == 2 and out == ""
    assert err.startswith(f"error: {field}: ") and err.count("\n") == 1 and says in err and len(err) < 300
    if db.exists():
        with Store(db) as store:
            assert store.price_overrides() == []


def test_device_text_is_bounded_too():
    with pytest.raises(SpecError) as info:
        prices.override_row(device="V" * 201, unit="GPU-hour", on_demand=1.0)
    assert info.value.field == "device"


def test_the_largest_price_is_taken_and_costs_stay_finite(tmp_path, capsys):
    db = tmp_path / "p.sqlite"
    code, out, _ = cli(
        capsys, *SET, "--on-demand", str(prices.MAX_USD_PER_HOUR), "--key", "k" * prices.MAX_TEXT, "--db", str(db)
    )
    assert code == 0
    row = run_cost.match_price("V100", 8, prices.catalog(Store(db, read_only=True)))
    assert row["usd_per_hour"] == 8 * prices.MAX_USD_PER_HOUR
    assert run_cost.usd_per_million_examples(1e-6, row["usd_per_hour"]) < float("inf")


def test_minus_zero_is_stored_and_printed_as_zero(tmp_path, capsys):
    db = tmp_path / "p.sqlite"
    code, out, err = cli(capsys, *SET, "--on-demand", "-0", "--spot", "-0.0", "--db", str(db))
    assert code == 0 and "-0" not in out and "$0/h" in out and err == ""
    code, out, _ = cli(capsys, "prices", "--json", "--db", str(db))
    row = next(r for r in json.loads(out) if r["origin"] == "override")
    assert json.dumps(row["on_demand_usd_per_hour"]) == "0.0" and json.dumps(row["spot_usd_per_hour"]) == "0.0"


def test_spot_above_on_demand_is_stored_with_a_one_line_warning(tmp_path, capsys):
    db = tmp_path / "p.sqlite"
    code, out, err = cli(capsys, *SET, "--on-demand", "1", "--spot", "3", "--db", str(db))
    assert code == 0 and "spot $3/h" in out
    assert err.count("\n") == 1 and err.startswith("warning: spot_usd_per_hour: ") and "above" in err
    with Store(db) as store:
        assert [r["spot_usd_per_hour"] for r in store.price_overrides()] == [3.0]
    code, _, err = cli(capsys, *SET, "--on-demand", "3", "--spot", "3", "--db", str(db))
    assert code == 0 and err == ""


def test_a_stored_override_out_of_bounds_is_left_out_and_named(tmp_path, capsys):
    db = tmp_path / "p.sqlite"
    assert main([*SET, "--on-demand", "2", "--key", "mine", "--db", str(db)]) == 0
    assert main([*SET, "--on-demand", "2", "--provider", "AWS", "--key", "huge", "--db", str(db)]) == 0
    with sqlite3.connect(db) as conn:  # as a version before the bound could have stored it
        conn.execute("UPDATE price_overrides SET on_demand_usd_per_hour = 1.7e308 WHERE key = 'huge'")
    capsys.readouterr()
    catalog = prices.catalog(Store(db, read_only=True))
    assert "mine" in set(catalog["key"]) and "huge" not in set(catalog["key"])
    assert [s.split(":")[0] for s in catalog.attrs["skipped_overrides"]] == ["huge"]
    code, out, err = cli(capsys, "prices", "--db", str(db))
    assert code == 0 and "mine" in out and "huge" not in out
    assert err.startswith("warning: ") and "huge" in err and "on_demand_usd_per_hour" in err and err.count("\n") == 1
