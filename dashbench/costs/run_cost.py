"""What a run costs: its device matched to a price row (the ranked catalog of dashbench.costs.prices),
the cost figures of its throughput at that price, and the price in words."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional

import pandas as pd

from dashbench.core import frames
from dashbench.core.spec import SpecError
from dashbench.costs.prices import COST_COLUMNS, NO_PRICE, _missing, _ranked, canonical_device


def matcher(catalog: pd.DataFrame) -> Callable[[Any, Any], Optional[dict]]:
    """match_price over one catalog for many runs: the catalog is indexed once and each (device,
    count) matched once; a table of many runs of few setups asks the same question again and again."""
    by_device: dict[str, list[dict]] = {}
    for row in frames.records(catalog):
        by_device.setdefault(str(row["device"]).lower(), []).append(row)
    ranked: dict[str, list[dict]] = {}
    answers: dict[tuple, Optional[dict]] = {}

    def match(accelerator, accelerator_count, host_cpus=None) -> Optional[dict]:
        key = (
            None if _missing(accelerator) else str(accelerator),
            None if _missing(accelerator_count) else accelerator_count,
            None if _missing(host_cpus) else host_cpus,
        )
        if key not in answers:
            answers[key] = _match(accelerator, accelerator_count, by_device, ranked, key[2])
        answer = answers[key]
        return dict(answer) if answer is not None else None

    return match


def match_price(accelerator, accelerator_count, catalog: pd.DataFrame, host_cpus=None) -> Optional[dict]:
    """The price row for a run on `accelerator_count` of `accelerator`, with what that run costs
    per hour (`units` billed × the row's price), or None when no row matches. A CPU run is priced by
    your price for "this machine" (device CPU) if you set one, else per vCPU-hour × `host_cpus`."""
    return matcher(catalog)(accelerator, accelerator_count, host_cpus)


def _match(accelerator, accelerator_count, by_device: dict, ranked: dict, host_cpus=None) -> Optional[dict]:
    if _missing(accelerator) or not str(accelerator).strip():
        return None
    count = 1 if _missing(accelerator_count) else int(accelerator_count)
    if count < 1:
        return None
    name = canonical_device(accelerator).lower()
    if name not in ranked:
        rows = by_device.get(name) or by_device.get(_family(accelerator), [])
        if name == "cpu":
            # Your price for "this machine" first; else the cloud's price per vCPU.
            rows = [r for r in rows if r["origin"] == "override"] or [r for r in rows if r["unit"] == "vCPU-hour"]
        ranked[name] = _ranked(rows)
    if not ranked[name]:
        return None
    row = dict(ranked[name][0])
    if row["unit"] == "vCPU-hour":  # billed per logical CPU of the run's host, whoever set the price
        if _missing(host_cpus) or int(host_cpus) < 1:
            return None
        count = units = int(host_cpus)
    else:
        units = math.ceil(count / int(row["chips_per_unit"]))
    spot = row["spot_usd_per_hour"]
    row.update(
        {
            "units": units,
            "accelerator_count": count,
            "usd_per_hour": units * row["on_demand_usd_per_hour"],
            "usd_per_hour_spot": None if _missing(spot) else units * spot,
        }
    )
    return row


def usd_per_million_examples(examples_per_sec, usd_per_hour) -> Optional[float]:
    if _bad_rate(examples_per_sec) or _missing(usd_per_hour):
        return None
    return usd_per_hour / (examples_per_sec * 3600.0) * 1e6


def examples_per_usd(examples_per_sec, usd_per_hour) -> Optional[float]:
    if _bad_rate(examples_per_sec) or _missing(usd_per_hour) or usd_per_hour <= 0:
        return None
    return examples_per_sec * 3600.0 / usd_per_hour


def _bad_rate(value) -> bool:
    return _missing(value) or not math.isfinite(value) or value <= 0


def cost_values(accelerator, accelerator_count, examples_per_sec, match, host_cpus=None) -> dict:
    """The COST_COLUMNS of one run, priced by `match` (a matcher over a catalog); an unmatched run
    gets price_note "no price" and empty costs."""
    price = match(accelerator, accelerator_count, host_cpus)
    if price is None:
        return dict(dict.fromkeys(COST_COLUMNS), price_note=NO_PRICE)
    eps = None if _missing(examples_per_sec) else float(examples_per_sec)
    return {
        "price_key": price["key"],
        "price_note": price_note(price),
        "usd_per_hour": price["usd_per_hour"],
        "usd_per_hour_spot": price["usd_per_hour_spot"],
        "usd_per_million_examples": usd_per_million_examples(eps, price["usd_per_hour"]),
        "usd_per_million_examples_spot": usd_per_million_examples(eps, price["usd_per_hour_spot"]),
        "examples_per_usd": examples_per_usd(eps, price["usd_per_hour"]),
        "examples_per_usd_spot": examples_per_usd(eps, price["usd_per_hour_spot"]),
    }


def add_cost_columns(runs_df: pd.DataFrame, catalog: pd.DataFrame) -> pd.DataFrame:
    """A copy of `runs_df` (needs accelerator, accelerator_count, examples_per_sec) with the
    COST_COLUMNS added (cost_values of each run)."""
    out = runs_df.copy()
    values = {column: [] for column in COST_COLUMNS}
    n = len(runs_df)

    def column(name):
        return runs_df[name].tolist() if name in runs_df else [None] * n

    match = matcher(catalog)
    for acc, count, eps, cpus in zip(
        column("accelerator"), column("accelerator_count"), column("examples_per_sec"), column("host_cpus")
    ):
        row = cost_values(acc, count, eps, match, cpus)
        for column in COST_COLUMNS:
            values[column].append(row[column])
    for column in COST_COLUMNS:
        series = pd.Series(values[column], index=out.index, dtype=object)
        if column not in ("price_key", "price_note"):
            series = pd.to_numeric(series, errors="coerce").astype(float)
        out[column] = series
    return out


def price_note(price: Mapping[str, Any]) -> str:
    """One line saying how a run was priced, e.g. "1 board of 4 chips for 2 chips; unconfirmed price"."""
    parts = []
    chips = int(price["chips_per_unit"])
    units = int(price["units"])
    what = _UNIT_NAMES.get(price["unit"], "unit")
    if price["unit"] == "vCPU-hour":
        parts.append(f"{units} vCPU{'s' if units > 1 else ''} (the run's host) at {price['key']}'s price per vCPU")
    elif chips > 1:
        plural = "s" if units > 1 else ""
        parts.append(f"{units} {what}{plural} of {chips} chips for {price['accelerator_count']} chips")
    elif units > 1:
        parts.append(f"{units} × {price['unit']}")
    if price.get("unconfirmed"):
        parts.append("unconfirmed price")
    if price.get("origin") == "override":
        parts.append("your price")
    return "; ".join(parts)


_UNIT_NAMES = {
    "vCPU-hour": "vCPU",
    "board-hour": "board",
    "VM-hour": "VM",
    "setup-hour": "setup",
    "chip-hour": "chip",
    "GPU-hour": "GPU",
}


def epochs_cost(examples_per_sec, dataset_size: int, epochs: float, price_row: Optional[Mapping[str, Any]]) -> dict:
    """Time and cost of `epochs` passes over `dataset_size` examples at `examples_per_sec`.

    `price_row` is what match_price returns (its usd_per_hour already covers the run's chips); a
    plain catalog row is taken as one unit. Costs are None where there is no price."""
    if _bad_rate(examples_per_sec):
        raise SpecError("examples_per_sec", f"must be a number > 0, got {examples_per_sec!r}")
    if isinstance(dataset_size, bool) or not isinstance(dataset_size, int) or dataset_size < 1:
        raise SpecError("dataset_size", f"must be an integer >= 1, got {dataset_size!r}")
    if _missing(epochs) or epochs <= 0:
        raise SpecError("epochs", f"must be a number > 0, got {epochs!r}")
    seconds = dataset_size * epochs / examples_per_sec
    hours = seconds / 3600.0
    on_demand = spot = None
    if price_row is not None:
        hourly = price_row.get("usd_per_hour", price_row.get("on_demand_usd_per_hour"))
        hourly_spot = price_row.get("usd_per_hour_spot", price_row.get("spot_usd_per_hour"))
        on_demand = None if _missing(hourly) else hours * hourly
        spot = None if _missing(hourly_spot) else hours * hourly_spot
    return {
        "examples": dataset_size * epochs,
        "seconds": seconds,
        "hours": hours,
        "usd_on_demand": on_demand,
        "usd_spot": spot,
    }


def _family(accelerator: str) -> str:
    """A variant priced by its family's rows when it has none of its own ("H100 PCIe" by "H100")."""
    from dashbench.hardware import catalog

    chip = catalog.find(str(accelerator))
    return canonical_device(chip.family).lower() if chip else ""
