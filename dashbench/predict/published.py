"""The published rows as calibration points (`dashbench/data/calibration.csv`).

Each row names its workload's shape, the catalog device and chip count it ran on, its precision
and its figure with the source. A step's profile is by formula: PaLM's 6N + 12·L·H·Q·T for a
Llama-class LM (dashbench.workloads.lm_shape), the analytic count of docs/PERFORMANCE.md's flops
table for the seed rows' image models. No bytes are published, so a published point is timed by
its compute term alone. Rows that cannot calibrate (a figure that includes compilation, a ratio
with no step time, a shape never published) stay in the file with `use` = no and the reason."""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from importlib import resources

import pandas as pd

from dashbench.predict.calibration import Calibration, Point
from dashbench.predict.roofline import FormulaStep
from dashbench.workloads import lm_shape

_SECONDS = {"s/step": 1.0, "ms/step": 1e-3}
GRAD_BYTES_PER_PARAM = 4.0  # fp32 gradients, one copy


def table() -> pd.DataFrame:
    """The file as shipped: every row, used or not."""
    with resources.files("dashbench").joinpath("data/calibration.csv").open("r", encoding="utf-8") as f:
        return pd.read_csv(f, dtype=str, keep_default_na=False)


@lru_cache(maxsize=1)
def points() -> tuple[Point, ...]:
    """The rows with `use` = yes, as calibration points on the catalog's chips."""
    from dashbench.hardware import catalog

    return tuple(point(row, catalog.get(row["device"])) for row in table().to_dict("records") if row["use"] == "yes")


def calibration() -> Calibration:
    return Calibration(points())


def point(row: dict, chip) -> Point:
    chips = int(row["chips"])
    batch = int(row["batch_per_chip"]) * chips
    profile = lm_profile(row, batch) if row["model"] == "llama" else image_profile(row, batch)
    figure = float(row["figure"])
    unit = row["figure_unit"]
    if unit == "tokens/s per chip":
        step = batch * profile.tokens_per_example / (figure * chips)
    elif unit == "examples/s":
        step = batch / figure
    else:
        step = figure * _SECONDS[unit]
    return Point(row["key"], profile, chip, chips, row["precision"], step, "published", row["source"])


def lm_dims(shape: str) -> lm_shape.LMDims:
    """A Llama-class shape as written in the file: every dimension named (405B's MLP and Llama 2's
    vocabulary are not lm_shape's rules)."""
    values = {k: int(v) for k, v in (part.split("=") for part in shape.split())}
    base = lm_shape.dims(values["width"], values["layers"], values["seq_len"])
    return dataclasses.replace(base, **{k: v for k, v in values.items() if k not in ("width", "layers", "seq_len")})


def lm_profile(row: dict, batch: int) -> FormulaStep:
    dims = lm_dims(row["shape"])
    return FormulaStep(
        model="llama",
        batch_size=batch,
        precision=row["precision"],
        flops=dims.palm_flops()["training"] * dims.seq_len * batch,
        params=dims.parameters,
        grad_bytes=GRAD_BYTES_PER_PARAM * dims.parameters,
        unit="tokens",
        tokens_per_example=dims.seq_len,
    )


def image_profile(row: dict, batch: int) -> FormulaStep:
    params = int(row["params"] or 0)
    return FormulaStep(
        model=row["model"],
        batch_size=batch,
        precision=row["precision"],
        flops=float(row["flops_per_example"]) * batch,
        params=params,
        grad_bytes=GRAD_BYTES_PER_PARAM * params,
        unit="examples",
    )
