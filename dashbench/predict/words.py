"""A prediction table in words: `predict`'s terminal table and its lines about the target. Every
predicted figure is labelled predicted (with "≈"); a measured one sits in its own column."""

from __future__ import annotations

import textwrap
from typing import Optional

import pandas as pd

# Left out first when a terminal is too narrow: the least needed first.
DROP_ORDER = ("calibration", "$/M spot", "step", "mfu", "measured", "pred/meas", "band")
CELL_CHARS = 40


def number(value: Optional[float], digits: int = 3) -> str:
    if value is None or value != value:
        return ""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def seconds(value: Optional[float]) -> str:
    if value is None or value != value:
        return ""
    if value < 1:
        return f"{value * 1e3:.3g} ms"
    if value < 3600:
        return f"{value:.3g} s"
    return f"{value / 3600:.3g} h"


def money(value: Optional[float]) -> str:
    return "" if value is None or value != value else f"${value:,.2f}" if value >= 1 else f"${value:.3g}"


def band_text(row: dict) -> str:
    if row.get("throughput_low") is None:
        return "no band"
    return f"{number(row['throughput_low'])}–{number(row['throughput_high'])}"


def frame(rows: list[dict]) -> pd.DataFrame:
    unit = rows[0]["unit"] if rows else "examples"
    return pd.DataFrame(
        {
            "device": [f"{r['device']} ×{r['chips']}" for r in rows],
            f"≈ {unit}/s per chip (predicted)": [number(r["throughput_per_chip"]) for r in rows],
            "band": [band_text(r) if r["throughput_low"] is None else _per_chip_band(r) for r in rows],
            "step": [seconds(r["step_s"]) for r in rows],
            "bound": [r["bound"] for r in rows],
            "mfu": [f"{r['mfu']:.0%}" if r["mfu"] is not None else "" for r in rows],
            f"$/M {unit}": [money(r["usd_per_million"]) for r in rows],
            "$/M spot": [money(r["usd_per_million_spot"]) for r in rows],
            "measured": [
                number(r["measured_throughput"] / r["chips"]) if r["measured_throughput"] else "" for r in rows
            ],
            "pred/meas": [f"{r['ratio']:.2f}" if r["ratio"] else "" for r in rows],
            "calibration": [r["calibration"] for r in rows],
        }
    )


def _per_chip_band(row: dict) -> str:
    chips = row["chips"]
    return f"{number(row['throughput_low'] / chips)}–{number(row['throughput_high'] / chips)}"


def format_table(rows: list[dict], width: Optional[int] = None) -> str:
    """Every column (`width` None), or fitted to a terminal `width` wide as `list` fits its table."""
    if not rows:
        return "(no device of the catalog computes at this precision)"
    table = frame(rows)
    text = table.to_string(index=False)
    if width is None or _widest(text) <= width:
        return _with_note(text, rows, width)
    table = table.map(lambda v: v[: CELL_CHARS - 1] + "…" if isinstance(v, str) and len(v) > CELL_CHARS else v)
    hidden = []
    for name in DROP_ORDER:
        if _widest(table.to_string(index=False)) <= width:
            break
        table = table.drop(columns=name)
        hidden.append(name)
    lines = [_cut(line, width) for line in table.to_string(index=False).split("\n")]
    if hidden:
        lines += textwrap.wrap(f"({', '.join(hidden)} left out to fit {width} characters; --wide shows them)", width)
    return _with_note("\n".join(lines), rows, width)


def _with_note(text: str, rows: list[dict], width: Optional[int]) -> str:
    notes = sorted({r["band_note"] for r in rows if r["band_note"]})
    lines = [
        "Predicted, not measured: a roofline fitted to published rows and your runs; the band is its leave-one-out error."
    ]
    lines += [f"- {n}" for n in notes]
    wrapped = [w for line in lines for w in (textwrap.wrap(line, width) if width else [line])]
    return "\n".join([text, *wrapped])


def target_lines(rows: list[dict]) -> list[str]:
    """Time and cost to the target on each device, from the store's to-accuracy run of this step."""
    reached = [r for r in rows if r.get("target_s") is not None]
    if not reached:
        return []
    first = reached[0]
    what = f"{first['target_metric']} {first['target']}"
    lines = [f"To the target ({what}; {number(first['steps_to_target'])} steps, run {first['target_run']}), predicted:"]
    cheapest = min((r for r in reached if r["target_usd"] is not None), key=lambda r: r["target_usd"], default=None)
    for r in reached:
        mark = "  ← cheapest" if r is cheapest else ""
        cost = (
            f", {money(r['target_usd'])} on demand, {money(r['target_usd_spot'])} spot"
            if r["target_usd"] is not None
            else ", no price"
        )
        lines.append(f"  {r['device']} ×{r['chips']}: {seconds(r['target_s'])}{cost}{mark}")
    return lines


def _widest(text: str) -> int:
    return max((len(line.rstrip()) for line in text.split("\n")), default=0)


def _cut(line: str, width: int) -> str:
    line = line.rstrip()
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"
