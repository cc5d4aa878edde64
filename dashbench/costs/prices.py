"""Price catalog and cost per unit of work. No TensorFlow here.

The catalog is the shipped file `dashbench/data/prices.csv` merged with the user's overrides kept in
the store: an override with a shipped row's key replaces that row in the merged view, any other key
adds a row; the shipped file is never written. Costs are derived when viewed, from the run's
recorded accelerator and count, so changing a price re-prices every stored run.

Rules for the shipped rows (from shared FIGURES.md):
- Every row carries a source and an as-of date (ISO prefix: YYYY, YYYY-MM or YYYY-MM-DD).
- A figure published as a range ("4.20–9.80 by region", spot "0.52–0.77") is stored as its lower
  bound, a price that is really offered somewhere; the row is marked unconfirmed and the range is
  kept in the note. An approximate figure ("~0.45") or one flagged "check" is marked unconfirmed too.
- Device is the accelerator's canonical name as the engine records it ("TPU v2", "V100"), or a VM
  name for a CPU-only VM: a CPU run is matched only through a user's override for "CPU" (this
  machine), never through a cloud VM it did not run on.

Matching a run (accelerator, count) to a price: overrides first; then per-chip / per-GPU rows,
then board, VM, setup and plain-hour rows; then the newest as-of; then confirmed before
unconfirmed. A unit of several chips is billed whole: 2 chips of a 4-chip board cost one board.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping, Optional

import pandas as pd

from dashbench.core import frames
from dashbench.core.spec import SpecError, ascii_float
from dashbench.store.schema import PRICE_COLUMNS

# One list of catalog columns, shared with the store's price_overrides table.
COLUMNS = PRICE_COLUMNS
# Not part of the agreed row: free text (ranges, what a VM holds), shipped rows only.
EXTRA_COLUMNS = ("note",)

# Order of preference when several rows price the same accelerator.
UNITS = ("chip-hour", "GPU-hour", "vCPU-hour", "board-hour", "VM-hour", "setup-hour", "hour")
_UNIT_RANK = {"chip-hour": 0, "GPU-hour": 0, "vCPU-hour": 0, "board-hour": 1, "VM-hour": 2, "setup-hour": 3, "hour": 4}

CANONICAL_ACCELERATORS = (
    "CPU",
    "K80",
    "P100",
    "V100",
    "T4",
    "L4",
    "A100",
    "H100",
    "H200",
    "TPU v2",
    "TPU v3",
    "TPU v4",
    "TPU v5e",
    "TPU v5p",
    "TPU v6e",
)
NO_PRICE = "no price"
_AS_OF = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")

COST_COLUMNS = (
    "price_key",
    "price_note",
    "usd_per_hour",
    "usd_per_hour_spot",
    "usd_per_million_examples",
    "usd_per_million_examples_spot",
    "examples_per_usd",
    "examples_per_usd_spot",
)


def shipped_catalog() -> pd.DataFrame:
    """The price file as shipped with the package (a copy: callers may change it freely)."""
    return _shipped_catalog().copy()


@lru_cache(maxsize=1)
def _shipped_catalog() -> pd.DataFrame:
    # Parsed once per process: the dashboard prices every rerun, and the shipped file never changes.
    with resources.files("dashbench").joinpath("data/prices.csv").open("r", encoding="utf-8") as f:
        frame = pd.read_csv(f, dtype={"key": str, "as_of": str, "region": str, "note": str})
    frame["origin"] = "shipped"
    return _normalise(frame)


def catalog(store=None) -> pd.DataFrame:
    """Shipped rows merged with the store's overrides (column `origin` says which is which). A stored
    override that fails today's checks (an older version took a price of 1e308) is left out, so no
    cost overflows in silence, and named in attrs["skipped_overrides"] ("key: field: why")."""
    shipped = shipped_catalog()
    if store is None:
        return shipped
    overrides, skipped = [], []
    for row in store.price_overrides():
        try:
            overrides.append(normalise_row(row))
        except SpecError as exc:
            skipped.append(f"{row.get('key')}: {exc}")
    if not overrides:
        merged = shipped
    else:
        override_frame = pd.DataFrame(overrides)
        override_frame["origin"] = "override"
        kept = shipped[~shipped["key"].isin(set(override_frame["key"]))]
        merged = _normalise(pd.concat([kept, override_frame], ignore_index=True))
    merged.attrs["skipped_overrides"] = skipped
    return merged


def _normalise(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for column in COLUMNS + EXTRA_COLUMNS:
        if column not in frame:
            frame[column] = None
    frame["chips_per_unit"] = frame["chips_per_unit"].astype(int)
    for column in ("on_demand_usd_per_hour", "spot_usd_per_hour"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    frame["unconfirmed"] = frame["unconfirmed"].map(_as_bool).astype(bool)
    for column in ("key", "device", "provider", "unit", "region", "source", "as_of", "origin", "note"):
        frame[column] = frame[column].map(lambda v: "" if is_missing(v) else str(v)).astype(object)
    return frame[list(COLUMNS + EXTRA_COLUMNS)].reset_index(drop=True)


def _as_bool(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    if is_missing(value):
        return False
    return bool(value)


def is_missing(value) -> bool:
    """None, NaN, pd.NA or NaT (what an empty cell of a runs frame holds)."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


# ---- overrides -------------------------------------------------------------------------------


def canonical_device(name: str) -> str:
    """'v100' -> 'V100', 'tpu v5e' -> 'TPU v5e'; other names (VMs, raw device names) kept as typed."""
    text = " ".join(str(name).split())
    for canonical in CANONICAL_ACCELERATORS:
        if text.lower() == canonical.lower() or text.lower().replace(" ", "") == canonical.lower().replace(" ", ""):
            return canonical
    return text


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


# The most chips one billed unit can hold: far above any pod slice sold, and an SQLite integer.
MAX_CHIPS_PER_UNIT = 100_000
# The highest price per unit-hour: far above any pod slice's (a few $10k/h), and low enough that
# chips × price × hours stays a finite float in every cost.
MAX_USD_PER_HOUR = 1_000_000
# A key, device, provider, region or source: one line of at most this many characters.
MAX_TEXT = 200
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def normalise_row(row: Mapping[str, Any]) -> dict:
    """Check a price row (an override, or one read back from the store) and fill its defaults."""
    device = canonical_device(row.get("device") or "")
    if not device:
        raise SpecError("device", "is required: an accelerator name such as V100, TPU v5e or CPU")
    _text("device", device)
    unit = row.get("unit") or ""
    if unit not in UNITS:
        raise SpecError("unit", f"unknown unit {unit!r}; choose one of: {', '.join(UNITS)}")
    chips = row.get("chips_per_unit")
    chips = 1 if is_missing(chips) else chips
    if isinstance(chips, float) and chips.is_integer():
        chips = int(chips)
    if isinstance(chips, bool) or not isinstance(chips, int) or chips < 1:
        raise SpecError("chips_per_unit", f"must be an integer >= 1, got {chips!r}")
    if chips > MAX_CHIPS_PER_UNIT:
        raise SpecError("chips_per_unit", f"must be an integer from 1 to {MAX_CHIPS_PER_UNIT}, got {chips}")
    on_demand = _price("on_demand_usd_per_hour", row.get("on_demand_usd_per_hour"), required=True)
    spot = _price("spot_usd_per_hour", row.get("spot_usd_per_hour"), required=False)
    as_of = str(row.get("as_of") or _dt.date.today().isoformat())
    if not _AS_OF.match(as_of):
        raise SpecError("as_of", f"must be a date YYYY-MM-DD (or YYYY-MM, YYYY), got {as_of!r}")
    provider = _text("provider", str(row.get("provider") or "user"))
    default_key = _slug(f"{provider}-{device}-{unit}" + (f"-x{chips}" if chips > 1 else ""))
    key = _text("key", str(row.get("key") or default_key))
    return {
        "key": key,
        "device": device,
        "provider": provider,
        "unit": unit,
        "chips_per_unit": chips,
        "on_demand_usd_per_hour": on_demand,
        "spot_usd_per_hour": spot,
        "region": _text("region", "" if is_missing(row.get("region")) else str(row.get("region") or "")),
        "source": _text("source", str(row.get("source") or "user override")),
        "as_of": as_of,
        "unconfirmed": _as_bool(row.get("unconfirmed", False)),
        "origin": "override",
    }


def _price(name: str, value, *, required: bool) -> Optional[float]:
    if is_missing(value) or value == "":
        if required:
            raise SpecError(name, "is required: USD per hour, a number >= 0")
        return None
    try:
        number = ascii_float(value) if isinstance(value, str) else float(value)  # float() reads ８ as 8
    except (TypeError, ValueError):
        raise SpecError(name, f"must be a finite number of USD per hour, got {_short(value)}") from None
    if not math.isfinite(number) or not 0 <= number <= MAX_USD_PER_HOUR:
        raise SpecError(name, f"must be a finite number from 0 to {MAX_USD_PER_HOUR} USD per hour, got {_short(value)}")
    return number + 0.0  # -0 is 0: never "$-0/h"


def _short(value) -> str:
    """A value for an error line: a 5000-digit number or a 100,000-character key is cut, not printed."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}… ({len(str(value))} characters)"


def _text(name: str, value: str) -> str:
    if len(value) > MAX_TEXT:
        raise SpecError(name, f"must be at most {MAX_TEXT} characters, got {len(value)}")
    if _CONTROL.search(value):
        raise SpecError(
            name, f"must be one line without control characters (newline, tab, escape), got {_short(value)}"
        )
    return value


def spot_warning(row: Mapping[str, Any]) -> Optional[str]:
    """A spot price above on-demand is allowed (a typo or a spike?) but said, as one line."""
    spot, on_demand = row.get("spot_usd_per_hour"), row.get("on_demand_usd_per_hour")
    if is_missing(spot) or is_missing(on_demand) or spot <= on_demand:
        return None
    return (
        f"spot_usd_per_hour: spot ${spot:g}/h is above on-demand ${on_demand:g}/h for {row.get('key')}; "
        "stored as given — check the two figures"
    )


def override_row(
    device: str,
    unit: str,
    on_demand: float,
    spot: Optional[float] = None,
    chips: Optional[int] = None,
    provider: Optional[str] = None,
    source: Optional[str] = None,
    region: Optional[str] = None,
    key: Optional[str] = None,
    current: Optional[pd.DataFrame] = None,
) -> dict:
    """An override row. Without a key, a row of `current` with the same device, provider, unit
    (and chips, when given) is the one overridden, so "prices set --device V100 --unit GPU-hour
    --provider GCP --on-demand 2.0" replaces the shipped GCP V100 price instead of adding a second."""
    device = canonical_device(device)
    if device == "CPU" and provider is None:
        # Shipped CPU prices are cloud VMs; a CPU run is priced only by the box it ran on.
        provider = "this machine"
    if key is None and current is not None and len(current):
        same = current[
            (current["device"].str.lower() == device.lower())
            & (current["unit"] == unit)
            & (current["provider"].str.lower() == (provider or "user").lower())
        ]
        if chips is not None:
            same = same[same["chips_per_unit"] == chips]
        if len(same):
            best = ranked_rows(same)[0]
            key = best["key"]
            if chips is None:
                chips = int(best["chips_per_unit"])
            if region is None:
                region = best["region"]
    return normalise_row(
        {
            "key": key,
            "device": device,
            "provider": provider,
            "unit": unit,
            "chips_per_unit": chips,
            "on_demand_usd_per_hour": on_demand,
            "spot_usd_per_hour": spot,
            "region": region,
            "source": source,
            "as_of": None,
            "unconfirmed": False,
        }
    )


def store_row(row: Mapping[str, Any]) -> dict:
    """The row as handed to Store.set_price_override: the agreed columns only."""
    return {column: row[column] for column in COLUMNS}


# ---- ranking (dashbench.costs.run_cost matches a run to the ranked rows) ----------------------


def ranked_rows(rows: pd.DataFrame | list[dict]) -> list[dict]:
    """The rows as records, best first: an override, then the smallest billing unit, the newest
    `as_of`, confirmed before unconfirmed, then by key. (Plain sorts: a few rows, asked per run.)"""
    records = frames.records(rows) if isinstance(rows, pd.DataFrame) else list(rows)
    records.sort(key=lambda r: str(r["key"]))
    records.sort(key=lambda r: bool(r["unconfirmed"]))
    records.sort(key=lambda r: "" if is_missing(r["as_of"]) else str(r["as_of"]), reverse=True)
    records.sort(key=lambda r: _UNIT_RANK.get(r["unit"], 9))
    records.sort(key=lambda r: r["origin"] != "override")
    return records
