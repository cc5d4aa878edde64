"""Shared wording and number helpers: flag names in words, run labels, missing-value checks, and
stored text made safe to show inside markdown."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

from dashbench.core.frames import records
from dashbench.results.result import (  # the wording of flags and ids lives with the result
    FLAG_SHORT,
    FLAG_TEXT,
    short_id,
)
from dashbench.workloads import model_file

PRECISION_SHORT = {"float32": "fp32", "mixed_float16": "fp16", "mixed_bfloat16": "bf16"}
DEFAULT_BACKEND = "tensorflow"  # what a run stored before backends existed ran on


def backend_of(row: dict | pd.Series) -> str:
    """The Keras backend of a run row (tensorflow when the row predates backends)."""
    value = row.get("backend")
    return str(value) if isinstance(value, str) and value else DEFAULT_BACKEND


def mixed_backends(frame: pd.DataFrame) -> bool:
    """Whether these runs ran on more than one backend: then every label names its backend."""
    if frame is None or frame.empty or "backend" not in frame:
        return False
    return frame["backend"].fillna(DEFAULT_BACKEND).nunique() > 1


def flag_list(flags: Any) -> list[str]:
    if flags is None or (isinstance(flags, float) and math.isnan(flags)):
        return []
    if isinstance(flags, str):
        try:
            flags = json.loads(flags)
        except ValueError:
            flags = [f for f in flags.replace(";", ",").split(",") if f.strip()]
    return [str(f).strip() for f in flags if str(f).strip()]


def flag_text(flags: Any, short: bool = True) -> str:
    names = FLAG_SHORT if short else FLAG_TEXT
    return "; ".join(names.get(f, f) for f in flag_list(flags))


# ---------------------------------------------------------------------------------------- markdown

# Every mark that CommonMark, GFM (tables, strikethrough, autolinks), math ($) or Streamlit's
# `:color[...]` directives give a meaning, wherever it stands; a backslash makes each one literal.
_MARKDOWN_PUNCTUATION = re.compile("([" + re.escape("\\`*_{}[]()<>#+-.!|~=:$&^\"'@") + "])")
# Streamlit turns `:material/name:` and `:smile:` into icons in the parsed text itself, after
# backslash escapes are gone: an invisible space after every colon is what stops those.
_WORD_BREAK = "\u200b"


def md_text(value: Any) -> str:
    """Stored text (a label, an error, a flag, a file name) as markdown that shows exactly that
    text: no images or links for a browser to fetch, no HTML, no icons or colours, no emphasis.
    For every string that did not come from dashbench's own code and goes into st.markdown,
    st.caption, st.error/warning/info/success, metric or expander labels."""
    if is_missing(value):
        return ""
    return _lines(_escaped(str(value)))


def _escaped(text: str) -> str:
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", text).replace(":", ":" + _WORD_BREAK)


def _lines(text: str) -> str:
    # Lines stay lines (hard breaks); leading blanks would start a code block, so they go.
    return "  \n".join(line.strip() for line in text.splitlines())


# A command in backticks, as dashbench's own notes name one ("run `python -m dashbench doctor`"): only the
# characters of a command line, so no colon (icons), bracket or markup can ride in one.
_COMMAND_SPAN = re.compile(r"`([A-Za-z0-9 ._/=+,-]+)`")


def md_text_with_commands(value: Any) -> str:
    """md_text, except that a `command` in backticks shows as code, not as literal backticks."""
    if is_missing(value):
        return ""
    text, parts, last = str(value), [], 0
    for match in _COMMAND_SPAN.finditer(text):
        parts += [_escaped(text[last : match.start()]), f"`{match.group(1)}`"]
        last = match.end()
    return _lines("".join(parts) + _escaped(text[last:]))


# ------------------------------------------------------------------------------------------ shapes

SHAPE_COLUMNS = ("image_size", "seq_len", "width")  # the spec's overrides, as the store keeps them
_SHAPE_SHORT = {"image_size": "{}px", "seq_len": "len{}", "width": "w{}"}


def run_shape(row: dict | pd.Series) -> dict:
    """{} for a full-size run; else the run's resolved shape over the dimensions its workload lets a
    spec override ({"image_size": 28, "width": 8}), from the stored overrides and the workload's
    full-size defaults (dashbench.workloads.registry)."""
    from dashbench.workloads import registry

    overrides = {}
    for name in SHAPE_COLUMNS:
        value = row.get(name)
        if is_number(value):
            overrides[name] = int(value)
    if not overrides:
        return {}
    workload = registry.builtin(row.get("model"))
    defaults = workload.defaults if workload else {}
    if all(defaults.get(name) == value for name, value in overrides.items()):
        return {}  # overrides that repeat the full-size defaults: a full-size run
    # The dimensions the store keeps (an LM's layer count is not one: the registry refuses it alone).
    names = [n for n in workload.overrides if n in SHAPE_COLUMNS] if workload else tuple(overrides)
    return {
        name: overrides.get(name, defaults.get(name))
        for name in names
        if overrides.get(name, defaults.get(name)) is not None
    }


def shape_text(row: dict | pd.Series) -> str:
    """'' for a full-size run; else "quick 28px w8" (every dimension at most full size) or
    "custom 512px" (one larger)."""
    shape = run_shape(row)
    if not shape:
        return ""
    from dashbench.workloads import registry

    workload = registry.builtin(row.get("model"))
    defaults = workload.defaults if workload else {}
    smaller = all(defaults.get(n) is None or v <= defaults[n] for n, v in shape.items())
    dims = " ".join(_SHAPE_SHORT[n].format(v) for n, v in shape.items())
    return f"{'quick' if smaller else 'custom'} {dims}"


def shape_key(row: dict | pd.Series) -> tuple:
    """What a run's shape is, for grouping: () when full size, else its resolved dimensions."""
    return tuple(sorted(run_shape(row).items()))


def workload_text(row: dict | pd.Series) -> str:
    """The workload and, unless full size, its shape: "fashion_mnist_cnn" or "fashion_mnist_cnn · quick 28px w8"."""
    model = row.get("model")
    # A model file's runs group by file and builder across the file's versions (each run keeps its own).
    model = model_file.family(model) if isinstance(model, str) and model else "?"
    shape = shape_text(row)
    return f"{model} · {shape}" if shape else model


# ------------------------------------------------------------------------------------------ labels


# What run_label reads of a run.
LABEL_COLUMNS = (
    "run_id",
    "label",
    "model",
    "accelerator",
    "device",
    "accelerator_count",
    "replicas",
    "batch_size",
    "precision",
    "xla",
    "backend",
    *SHAPE_COLUMNS,
)


def run_labels(
    runs: pd.DataFrame, with_model: bool = True, with_backend: bool | None = None, id_first: bool = False
) -> list[str]:
    """run_label of every row of a runs frame, reading only the columns it needs."""
    return [
        run_label(r, with_model, with_backend, id_first) for r in records(runs[[c for c in LABEL_COLUMNS if c in runs]])
    ]


def run_label(
    row: dict | pd.Series, with_model: bool = True, with_backend: bool | None = None, id_first: bool = False
) -> str:
    """Short, unique name for a run on a chart axis: what ran, where (and on how many replicas when the
    device count does not say it), and its id. The backend is named when it is not TensorFlow
    (with_backend None), always (True: runs of both backends side by side) or never (False).
    id_first: "#ea38f1 · resnet50 · CPU · b8 (label)", for a table column that cuts a long name short:
    the id a command takes stays in view, as `git log --oneline` keeps it."""
    # A run that never started has no accelerator yet (NaN from the store): name the device asked for.
    acc = next(
        (str(v) for v in (row.get("accelerator"), str(row.get("device") or "").upper()) if v and not is_missing(v)), "?"
    )
    count = row.get("accelerator_count")
    if is_number(count) and count > 1:
        acc = f"{int(count)}×{acc}"
    model = str(row.get("model") or "?")
    # A model file's identity ("mlp_with_a_long_name.py:build@3fa9c2d1e0b4") cut a table's run column
    # before the device and batch: there it reads as its file (the id tells the runs apart) and comes last.
    from_file = id_first and with_model and (model_file.version(model) is not None or model_file.looks_like_file(model))
    parts = ([model] if with_model and not from_file else []) + [acc]
    replicas = row.get("replicas")
    # Replicas the device count does not already say (a CPU split into logical devices): a 2-replica
    # run and a 1-replica run of one batch must not read alike.
    if is_number(replicas) and replicas > 1 and replicas != (count if is_number(count) else 1):
        parts.append(f"{int(replicas)} replicas")
    parts.append(f"b{int_text(row.get('batch_size'))}")
    precision = row.get("precision")
    if precision:
        parts.append(PRECISION_SHORT.get(precision, str(precision)))
    if bool(row.get("xla")) and not is_missing(row.get("xla")):
        parts.append("XLA")
    shape = shape_text(row)
    if shape:  # a quick-shape run is never mistaken for a full-size one
        parts.append(shape)
    backend = backend_of(row)
    if with_backend or (with_backend is None and backend != DEFAULT_BACKEND):
        parts.append(backend)
    if from_file:
        parts.append(file_text(model))
    label = row.get("label")
    run_id = short_id(str(row.get("run_id", "")))
    if id_first:
        return f"{run_id} · " + " · ".join(parts) + (f" ({label})" if isinstance(label, str) and label else "")
    tail = f"{label} {run_id}" if isinstance(label, str) and label else run_id
    return " · ".join(parts) + f" ({tail})"


def file_text(model: str) -> str:
    """A model file's identity without its version, and without its builder when that is the default:
    'mlp.py:build@3fa9c2d1e0b4' → 'mlp.py', 'mlp.py:wide@…' → 'mlp.py:wide'."""
    name = model_file.family(model)
    return name.removesuffix(":" + model_file.DEFAULT_BUILDER)


def path_text(path) -> str:
    """A file's path as the sidebar shows it: under the home folder as ~/…, as a shell would take it. A
    server's URL as it is (settings hold it masked: a Path would fold its "//")."""
    from pathlib import Path

    if isinstance(path, str) and "://" in path:
        return path
    path = Path(path)
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except (ValueError, RuntimeError):  # elsewhere, or no home folder known
        return str(path)


# The characters of code text the sidebar draws on one line (its own line, after "database:"), with room to spare.
SIDEBAR_PATH_CHARS = 34


def short_path_text(path, room: int = SIDEBAR_PATH_CHARS) -> str:
    """path_text shortened from the left to `room` characters, whole folder names only and the file's name
    always whole: '…/dashbench/runs.sqlite'. Inline code breaks a name it cannot fit anywhere, even inside a
    word ('sqlit' / 'e'); the full path goes in the line's tooltip. A server's URL as path_text gives it."""
    text = path_text(path)
    if len(text) <= room or "://" in text:
        return text
    sep = "\\" if "\\" in text and "/" not in text else "/"
    parts = text.split(sep)
    kept = [parts[-1]]
    for name in reversed(parts[1:-1]):
        if len("…" + sep + sep.join([name, *kept])) > room:
            break
        kept.insert(0, name)
    return "…" + sep + sep.join(kept)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not is_missing(value)


def is_missing(value: Any) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def int_text(value: Any) -> str:
    return str(int(value)) if is_number(value) else "?"


def duration_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def with_ms(frame: pd.DataFrame) -> pd.DataFrame:
    """Step-time columns in milliseconds (`step_time_*_ms`), the unit people read step times in."""
    out = frame.copy()
    for stat in ("median", "p10", "p90"):
        if f"step_time_{stat}_s" in out:
            out[f"step_time_{stat}_ms"] = pd.to_numeric(out[f"step_time_{stat}_s"], errors="coerce") * 1000.0
    return out


# Whole-number columns of the tables: pandas' nullable Int64, so a blank stays blank and 64 never
# becomes 64.0 (in the CSV too) when a column also holds missing values.
INT_COLUMNS = (
    "batch_size",
    "accelerator_count",
    "replicas",
    "samples",
    "steps",
    "image_size",
    "seq_len",
    "width",
    "chips_per_unit",
    "baseline_batch_size",
    "host_cpus",
    "reached",
    "seeds",
)


def nullable_ints(table: pd.DataFrame) -> pd.DataFrame:
    """The table with its whole-number columns (INT_COLUMNS) as Int64; a column holding a fraction stays."""
    out = table.copy()
    for column in INT_COLUMNS:
        if column not in out:
            continue
        values = pd.to_numeric(out[column], errors="coerce")
        known = values.dropna()
        if len(known) == out[column].notna().sum() and (known == known.round()).all():
            out[column] = values.round().astype("Int64")
    return out


NOTHING_WORDS = frozenset(("None", "nan", "NaN", "<NA>"))


def blank_text(table: pd.DataFrame) -> pd.DataFrame:
    """Text cells that hold the word for nothing ("None", "nan", from str() of a missing value) as NA.
    Only columns holding such a word are rewritten (a copy shares the others)."""
    if table.attrs.get("blank_text") == tuple(table.columns):
        return table  # done already: a page's cached table is not scanned again on each rerun
    out = table.copy(deep=False)
    out.attrs["blank_text"] = tuple(out.columns)
    for column in out.columns:
        if out[column].dtype == object or pd.api.types.is_string_dtype(out[column]):
            values = out[column].tolist()
            if any(isinstance(v, str) and v in NOTHING_WORDS for v in values):
                out[column] = pd.Series(
                    [pd.NA if isinstance(v, str) and v in NOTHING_WORDS else v for v in values],
                    index=out.index,
                    dtype=object,
                )
    return out


def unreadable_note(runs) -> str:
    """Markdown naming the stored runs that Store.runs() skipped as unreadable; '' when none."""
    from dashbench.store import unreadable_text

    return md_text(unreadable_text(runs))


def cost_unit(models) -> str:
    """What a "USD per million" of these rows' models counts: "examples", "tokens" (an LM's throughput
    and so its cost are per token), or "of the run's unit (examples or tokens)" where rows mix them."""
    from dashbench.workloads import registry

    def word(model) -> str:
        workload = registry.builtin(model)
        return "tokens" if workload is not None and workload.unit == "tokens" else "examples"

    words = {word(m) for m in models}
    return words.pop() if len(words) == 1 else "examples" if not words else "of the run's unit (examples or tokens)"


def cost_help(models) -> str:
    """The "$ / 1M" column's hint for a table of these models' rows."""
    return f"on-demand USD per million {cost_unit(models)}"
