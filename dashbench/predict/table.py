"""One prediction per device of the catalog, with its price, the store's measured figure beside it,
and time and cost to a target where the store holds a to-accuracy run of the same step.

Where the store holds a measured run of this very step on a device, that device's prediction is
made without the run (and without any run of the workload on it), so the ratio beside it says how
far the predictor was off, not how well it repeats the run."""

from __future__ import annotations

from typing import Optional

from dashbench.costs import prices, run_cost
from dashbench.predict import measured
from dashbench.predict.calibration import Calibration
from dashbench.predict.roofline import PredictError, Prediction, chip_precision, predict

PER = 1e6  # cost per million examples or tokens


def check_devices(chips_, precision: str) -> None:
    """Refuses, naming the field, a precision that a device asked for by name lacks."""
    for chip in chips_:
        chip_precision(chip, precision)


def rows(
    profile, chips_: list, chips: int, calib: Calibration, store=None, precision: Optional[str] = None
) -> list[dict]:
    """One dict per device: the Prediction's fields, price and costs, measured figure and ratio,
    time and cost to target. A device that cannot compute at the precision is left out (the caller
    checks the devices a user named: check_devices)."""
    precision = precision or profile.precision
    runs = measured.runs_with_profiles(store, profile.model) if store is not None else []
    mine = measured.points(runs)
    full = calib.plus(mine)
    to_target = measured.steps_to_target(runs, profile)
    match = run_cost.matcher(prices.catalog(store))
    out = []
    for chip in chips_:
        try:
            chip_precision(chip, precision)
        except PredictError:
            continue
        seen = measured.measured_for(mine, profile, chip, chips)
        calib_here = full
        if seen:
            hidden = {p.key for p in mine if p.chip.name == chip.name and p.profile.model == profile.model}
            calib_here = Calibration(p for p in full.points if p.key not in hidden)
        pred = predict(profile, chip, chips, calib_here, precision)
        out.append(_row(pred, chip, seen, to_target, match))
    return out


def _row(pred: Prediction, chip, seen: list, to_target: Optional[dict], match) -> dict:
    row = pred.to_dict()
    price = match(chip.name, pred.chips) or match(chip.family, pred.chips)
    hourly = price["usd_per_hour"] if price else None
    spot = price["usd_per_hour_spot"] if price else None
    row.update(
        price_key=price["key"] if price else None,
        price_note=run_cost.price_note(price) if price else prices.NO_PRICE,
        usd_per_hour=hourly,
        usd_per_hour_spot=spot,
        usd_per_million=_per_million(pred.throughput, hourly),
        usd_per_million_spot=_per_million(pred.throughput, spot),
        usd_per_million_low=_per_million(pred.throughput_high, hourly),
        usd_per_million_high=_per_million(pred.throughput_low, hourly),
        measured_step_s=None,
        measured_throughput=None,
        ratio=None,
        measured_runs=[],
    )
    if seen:
        step = sorted(p.step_s for p in seen)[len(seen) // 2]
        row.update(
            measured_step_s=step,
            measured_throughput=pred.throughput * pred.step_s / step,
            ratio=pred.step_s / step,
            measured_runs=[p.source.removeprefix("run ") for p in seen],
        )
    row.update(_to_target(pred, to_target, hourly, spot))
    return row


def _to_target(pred: Prediction, to_target: Optional[dict], hourly, spot) -> dict:
    if not to_target:
        return {
            "target_run": None,
            "steps_to_target": None,
            "target_s": None,
            "target_usd": None,
            "target_usd_spot": None,
        }
    seconds = to_target["steps"] * pred.step_s
    return {
        "target_run": to_target["run_id"],
        "target": to_target["target"],
        "target_metric": to_target["metric"],
        "steps_to_target": to_target["steps"],
        "target_s": seconds,
        "target_usd": None if hourly is None else seconds / 3600.0 * hourly,
        "target_usd_spot": None if spot is None else seconds / 3600.0 * spot,
    }


def _per_million(throughput, usd_per_hour) -> Optional[float]:
    return run_cost.usd_per_million_examples(throughput, usd_per_hour)


def cheapest_to_target(table: list[dict]) -> Optional[str]:
    """The device that reaches the target for the least on-demand money (None without a target run)."""
    priced = [r for r in table if r.get("target_usd") is not None]
    return min(priced, key=lambda r: r["target_usd"])["device"] if priced else None
