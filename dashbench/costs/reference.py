"""Published results from the seed articles (shared FIGURES.md) as a dataset. No TensorFlow here.

The data file `dashbench/data/reference.csv` holds only what was published: the raw figure in its
own unit with its qualifier ("~", ">"), how many examples one figure covers, and the source.
Everything derived is computed here, the same way for every row: examples per second, FLOP/s
against the hardware's peak (the "above_peak" flag, as for a measured run), the device the code
really ran on ("placement_mismatch"), and ratios from raw figures next to the ratio the source
claimed (the BiLSTM's "16.9×" is 21,402 / 1,658 = 12.9×).
"""

from __future__ import annotations

import math
from functools import lru_cache
from importlib import resources
from typing import Optional

import pandas as pd

# Seed 000's micro-benchmark: tf.nn.conv2d on 128 random 256×256×3 images, 256 filters 5×5, stride 2, SAME.
SEED_CONV2D = {"batch": 128, "height": 256, "width": 256, "channels": 3, "filters": 256, "kernel": 5, "stride": 2}

_SECONDS = {"s/iteration": 1.0, "ms/iteration": 1e-3, "s": 1.0}
_RATES = ("examples/s", "images/s", "sequences/s", "tokens/s")
RATIO_UNIT = "×"
# A published ratio and the one computed from raw figures "agree" when they round alike.
_CLAIM_TOLERANCE = 0.05


def conv2d_flops(
    batch: int,
    height: int,
    width: int,
    channels: int,
    filters: int,
    kernel: int,
    stride: int = 1,
    padding: str = "SAME",
) -> float:
    """Forward FLOPs of one 2-D convolution (a multiply-add counts 2)."""
    if padding == "SAME":
        out_h, out_w = math.ceil(height / stride), math.ceil(width / stride)
    elif padding == "VALID":
        out_h, out_w = (height - kernel) // stride + 1, (width - kernel) // stride + 1
    else:
        raise ValueError(f"padding: unknown padding {padding!r}; choose one of: SAME, VALID")
    return 2.0 * batch * out_h * out_w * filters * kernel * kernel * channels


def flops_per_figure(row: dict) -> Optional[float]:
    """FLOPs behind one published figure, where the workload's shape was published exactly.

    `shards` counts copies of the whole workload in one figure: tf.contrib.tpu.batch_parallel
    splits only its inputs, and the seed's conv took none (its arrays are built inside the
    function), so each of the 8 shards ran all 128 images."""
    if row.get("model") == "conv2d" and row.get("figure_unit") in ("s/iteration", "ms/iteration"):
        return conv2d_flops(**SEED_CONV2D) * (row.get("shards") or 1)
    return None


def lm_flops_per_token() -> float:
    """Training FLOPs per token of the full-size LM (Llama 3.1 8B, 8192 tokens) by PaLM's formula, the
    convention dashbench's own llama runs report."""
    from dashbench.workloads import lm_shape

    return lm_shape.dims(**{k: lm_shape.FULL[k] for k in ("width", "layers", "seq_len")}).palm_flops()["training"]


def peak_tflops(accelerator: str, count: int = 1) -> Optional[float]:
    """Datasheet peak of `count` chips, the highest precision's (any published figure above it is
    impossible whatever its precision); None for a CPU (measured, not a datasheet figure)."""
    from dashbench.hardware import peaks

    row = peaks.table().get(accelerator)
    figures = [row[c] for c in ("bf16_tflops", "fp16_tflops", "tf32_tflops", "fp32_tflops") if row and row[c]]
    return max(figures) * count if figures else None


def data_rows() -> pd.DataFrame:
    """The shipped file as published (no derived columns)."""
    with resources.files("dashbench").joinpath("data/reference.csv").open("r", encoding="utf-8") as f:
        frame = pd.read_csv(f, dtype=str, keep_default_na=False)
    return frame


def rows() -> pd.DataFrame:
    """Published rows with derived columns: examples_per_sec (+ _qualifier), achieved_tflops,
    peak_tflops, mfu, flags (list), ratio_claimed, ratio_computed, ratio (computed where possible,
    else the claim), claim_differs, usd_per_million_examples (only from a price published with the figure:
    published_usd_per_hour); `kind` is "reference" on every row. A copy: callers may change it."""
    return _rows().copy()


@lru_cache(maxsize=1)
def _rows() -> pd.DataFrame:
    # Derived once per process: Compare reruns on every widget change, and the figures are fixed.
    raw = data_rows()
    records = [_typed(r) for r in raw.to_dict("records")]
    by_key = {r["key"]: r for r in records}
    for r in records:
        _derive_speed(r)
    for r in records:
        _derive_ratio(r, by_key)
    frame = pd.DataFrame(records)
    frame["kind"] = "reference"
    return frame


def ratios() -> pd.DataFrame:
    """Only the comparisons: claimed ratio and, where raw figures exist, the computed one."""
    frame = rows()
    frame = frame[frame["figure_unit"] == RATIO_UNIT]
    return frame[
        [
            "key",
            "name",
            "model",
            "accelerator",
            "baseline",
            "ratio_claimed",
            "ratio_computed",
            "ratio",
            "ratio_qualifier",
            "claim_differs",
            "source",
        ]
    ].reset_index(drop=True)


def get(key: str) -> dict:
    frame = rows()
    match = frame[frame["key"] == key]
    if match.empty:
        raise KeyError(f"reference: unknown row {key!r}; known: {', '.join(frame['key'])}")
    return match.iloc[0].to_dict()


def _typed(r: dict) -> dict:
    out = dict(r)
    for name in ("accelerator_count", "batch_size", "baseline_batch_size", "examples_per_figure", "shards"):
        out[name] = int(r[name]) if r[name] else None
    for name in ("figure", "published_usd_per_hour"):
        out[name] = float(r[name]) if r[name] else None
    out["reported_flags"] = [f for f in r["reported_flags"].split(";") if f]
    return out


def _derive_speed(r: dict) -> None:
    unit, figure, qualifier = r["figure_unit"], r["figure"], r["qualifier"]
    eps = None
    eps_qualifier = qualifier
    seconds = None
    if unit in _SECONDS:
        seconds = figure * _SECONDS[unit]
        eps = r["examples_per_figure"] / seconds
        # More seconds means fewer examples per second.
        eps_qualifier = {">": "<", "<": ">"}.get(qualifier, qualifier)
    elif unit in _RATES:
        eps = figure
    r["seconds_per_figure"] = seconds
    r["examples_per_sec"] = eps
    r["examples_per_sec_qualifier"] = eps_qualifier if eps is not None else ""

    flops = flops_per_figure(r)
    r["flops_per_figure"] = flops
    # The chip the code ran on bounds the figure, not the one the article named.
    chip = r["ran_on"] or r["accelerator"]
    peak = peak_tflops(chip, r["accelerator_count"] if not r["ran_on"] else 1)
    achieved = flops / seconds / 1e12 if flops is not None and seconds else None
    if achieved is None and r["model"] == "llama" and unit == "tokens/s":
        achieved = eps * lm_flops_per_token() / 1e12  # published LM rows are at full size
    r["achieved_tflops"] = achieved
    r["peak_tflops"] = peak
    r["mfu"] = achieved / peak if achieved is not None and peak else None
    flags = list(r["reported_flags"])
    if achieved is not None and peak is not None and achieved > peak:
        flags.append("above_peak")
    if r["ran_on"] and r["ran_on"] != r["accelerator"]:
        flags.append("placement_mismatch")
    r["flags"] = flags
    price = r["published_usd_per_hour"]
    r["usd_per_million_examples"] = price / (eps * 3600.0) * 1e6 if price is not None and eps else None


def _derive_ratio(r: dict, by_key: dict) -> None:
    r["ratio_claimed"] = r["ratio_computed"] = r["ratio"] = None
    r["ratio_qualifier"] = ""
    r["claim_differs"] = None
    if r["figure_unit"] != RATIO_UNIT:
        return
    r["ratio_claimed"] = r["figure"]
    r["ratio_qualifier"] = r["qualifier"]
    if r["numerator"] and r["denominator"]:
        top, bottom = by_key[r["numerator"]], by_key[r["denominator"]]
        if top["examples_per_sec"] and bottom["examples_per_sec"]:
            computed = top["examples_per_sec"] / bottom["examples_per_sec"]
            r["ratio_computed"] = computed
            approximate = any(q for q in (top["examples_per_sec_qualifier"], bottom["examples_per_sec_qualifier"]))
            r["ratio_qualifier"] = "~" if approximate else ""
            r["claim_differs"] = abs(computed - r["figure"]) > _CLAIM_TOLERANCE * computed
    r["ratio"] = r["ratio_computed"] if r["ratio_computed"] is not None else r["ratio_claimed"]
