"""`list`'s output: JSON-ready records, and the table, whole or fitted to the terminal's width."""

from __future__ import annotations

import textwrap

import pandas as pd

from dashbench.cli.terminal import shown
from dashbench.store import short_id
from dashbench.workloads import model_file

COUNT_COLUMNS = (
    "accelerator_count",
    "replicas",
    "samples",
    "pid",
    "image_size",
    "seq_len",
    "width",
    "host_cpus",
    "reached",
    "seeds",
)


def records(frame: pd.DataFrame) -> list[dict]:
    """JSON-ready rows: ISO times, null for missing, whole counts as integers."""
    out = []
    for row in frame.to_dict("records"):
        item = {}
        for key, value in row.items():
            if isinstance(value, pd.Timestamp):
                value = value.isoformat()
            elif isinstance(value, (list, dict)):
                pass
            elif pd.isna(value):
                value = None
            elif key in COUNT_COLUMNS:
                value = int(value)
            elif hasattr(value, "item"):  # numpy scalar
                value = value.item()
            item[key] = value
        out.append(item)
    return out


def format_table(frame: pd.DataFrame, width: int | None = None) -> str:
    """`list`'s table: every column (`width` None: `--wide`, or output to a pipe or file), or fitted to a
    terminal `width` characters wide, as `docker ps` fits it: the dashboard's short ids, long cells cut
    with "…", the least needed columns left out (DROP_ORDER, named on a last line) and, if still too
    wide, each line cut with "…"."""
    table = _table(frame)
    text = _text(table)
    if width is None:
        return text
    if _widest(text) <= width:
        return "\n".join(line.rstrip() for line in text.split("\n"))
    table = table.assign(run_id=[short_id(r) for r in frame["run_id"]])
    # A model file's identity is cut in its name, not its end: the version tells two edits apart.
    models = table["model"].map(lambda v: model_file.short_identity(v, CELL_CHARS) if isinstance(v, str) else v)
    table = table.assign(model=models)
    table = table.map(lambda v: v[: CELL_CHARS - 1] + "…" if isinstance(v, str) and len(v) > CELL_CHARS else v)
    # A column blank on every row says nothing: left out first, and not named.
    table = table.drop(columns=[name for name in DROP_ORDER if name in table and not (table[name] != "").any()])
    hidden = []
    for name in DROP_ORDER:
        text = _text(table)
        if _widest(text) <= width:
            break
        if name in table:
            table = table.drop(columns=name)
            hidden.append(name)
    text = _text(table)
    note = (
        f"({len(hidden)} column{'s' if len(hidden) != 1 else ''} left out to fit {width} characters: "
        f"{', '.join(hidden)}; --wide shows every column and the full run ids)"
        if hidden
        else "(fitted to the terminal; --wide shows every column and the full run ids)"
    )
    return "\n".join([*(_cut(line, width) for line in text.split("\n")), *textwrap.wrap(note, width)])


# Left out first when a terminal is too narrow for every column: the least needed first. The run id,
# status, model, device, batch, throughput, flags and time to target stay.
DROP_ORDER = (
    "image_size",
    "seq_len",
    "width",
    "sweep",
    "xla",
    "replicas",
    "epochs→target",
    "val acc",
    "precision",
    "backend",
    "peak mem",
    "created",
    "reached",
    "target",
    "mfu",
)
CELL_CHARS = 28  # a longer cell (a model's name, several flags) is cut with "…" in a fitted table


def _text(table: pd.DataFrame) -> str:
    return table.map(lambda v: shown(v) if isinstance(v, str) else v).to_string(index=False)


def _widest(text: str) -> int:
    return max((len(line.rstrip()) for line in text.split("\n")), default=0)


def _cut(line: str, width: int) -> str:
    line = line.rstrip()  # the padding of blank cells at the end is no content to cut
    return line if len(line) <= width else line[: max(width - 1, 0)] + "…"


def _table(frame: pd.DataFrame) -> pd.DataFrame:
    local = frame["created_at"].dt.tz_convert(None) if len(frame) else frame["created_at"]
    table = pd.DataFrame(
        {
            "run_id": frame["run_id"],
            "created": local.dt.strftime("%Y-%m-%d %H:%M") if len(frame) else local,
            "status": frame["status"],
            "model": frame["model"],
            # A run that never measured has no accelerator yet: its kind as asked, in the same case.
            "device": frame["accelerator"].fillna(frame["device"].map(lambda d: d if d == "auto" else str(d).upper())),
            "backend": frame["backend"].fillna("tensorflow"),
            "batch": frame["batch_size"],
            "replicas": [
                str(int(v)) if not pd.isna(v) else "1" if d == "cpu" else "all"
                for v, d in zip(frame["replicas"], frame["device"])
            ],  # not asked: the engine's default
            "precision": frame["precision"],
            "xla": frame["xla"].map(lambda v: "xla" if v else ""),
            "examples/s": frame["examples_per_sec"].map(lambda v: "" if pd.isna(v) else f"{v:,.1f}"),
            "mfu": frame["mfu"].map(lambda v: "" if pd.isna(v) else f"{v:.1%}"),
            **(
                {"peak mem": frame["peak_memory_bytes"].map(lambda v: "" if pd.isna(v) else f"{v / 1e9:.2f} GB")}
                if "peak_memory_bytes" in frame
                else {}
            ),
            **(accuracy_table(frame) if frame.get("seeds", pd.Series(dtype=float)).notna().any() else {}),
            "flags": frame["flags"].map(lambda f: ",".join(f)),
            "sweep": frame["sweep_id"].fillna(""),
            # The spec's shape overrides; blank: the workload's full-size default (`models` lists them).
            **{
                name: frame[name].map(lambda v: "" if pd.isna(v) else str(int(v)))
                for name in ("image_size", "seq_len", "width")
                if name in frame
            },
        }
    )
    return table


def accuracy_table(frame: pd.DataFrame) -> dict:
    """`list`'s to-accuracy columns, shown when some listed run trained to accuracy: the target, seeds
    that reached it, median time and epochs to it, the final validation accuracy (a loss target's: its loss)."""

    def blank_or(fmt):
        return lambda v: "" if pd.isna(v) else fmt(v)

    losses = frame["target_loss"] if "target_loss" in frame else pd.Series([None] * len(frame), index=frame.index)
    targets = frame["target_accuracy"].where(frame["target_accuracy"].notna(), losses)
    reached = [
        ("" if pd.isna(t) else f"{int(r)}/{int(n)}") if not pd.isna(n) else ""
        for t, r, n in zip(targets, frame["reached"], frame["seeds"])
    ]
    return {
        # A loss target reads "loss ≤ 3.3": it is met from above.
        "target": [
            ("" if pd.isna(a) else f"{a:g}") if pd.isna(v) else f"loss ≤ {v:g}"
            for a, v in zip(frame["target_accuracy"], losses)
        ],
        "reached": reached,
        "to target": frame["time_to_target_s"].map(blank_or(lambda v: f"{v:.1f} s")),
        "epochs→target": frame["epochs_to_target"].map(blank_or(lambda v: f"{v:g}")),
        "val acc": frame["final_val_accuracy"].map(blank_or(lambda v: f"{v:.4f}")),
        **(
            {
                "steps→target": frame["steps_to_target"].map(blank_or(lambda v: f"{v:g}")),
                "val loss": frame["final_val_loss"].map(blank_or(lambda v: f"{v:.4f}")),
            }
            if losses.notna().any() and "final_val_loss" in frame
            else {}
        ),
    }
