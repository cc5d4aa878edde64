"""The Prices page's tables: the catalog in use and the published reference rows."""

from __future__ import annotations

import pandas as pd

from dashbench.views.common.format import flag_text

CATALOG_COLUMNS = [
    "origin",
    "device",
    "provider",
    "unit",
    "chips_per_unit",
    "on_demand_usd_per_hour",
    "spot_usd_per_hour",
    "region",
    "unconfirmed",
    "source",
    "as_of",
    "note",
    "key",
]


def catalog_table(catalog: pd.DataFrame) -> pd.DataFrame:
    """The catalog with overrides first, so 'which price is mine' is the first thing read."""
    columns = [c for c in CATALOG_COLUMNS if c in catalog] + [c for c in catalog if c not in CATALOG_COLUMNS]
    table = catalog[columns].copy()
    order = table["origin"].ne("override") if "origin" in table else pd.Series(0, index=table.index)
    return table.assign(_o=order).sort_values(["_o", "device"], kind="stable").drop(columns="_o").reset_index(drop=True)


# What it works out to (seen at a 1400 px window: columns.MUST_SEE) next to the name, what was published after.
REFERENCE_COLUMNS = [
    "name",
    "examples_per_sec",
    "mfu",
    "usd_per_million_examples",
    "flags",
    "figure_text",
    "achieved_tflops",
    "ratio_claimed",
    "ratio_computed",
    "claim_differs",
    "workload",
    "accelerator",
    "accelerator_count",
    "batch_size",
    "precision",
    "source",
    "as_of",
    "note",
    "key",
]


def reference_table(reference: pd.DataFrame) -> pd.DataFrame:
    """Published rows: what each works out to first, then what was published, the raw columns after."""
    columns = [c for c in REFERENCE_COLUMNS if c in reference] + [c for c in reference if c not in REFERENCE_COLUMNS]
    table = reference[columns].copy()
    if "flags" in table:
        table["flags"] = [flag_text(f) for f in table["flags"]]
    return table.reset_index(drop=True)
