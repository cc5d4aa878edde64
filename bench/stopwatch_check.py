"""Does the step time the engine reports match a stopwatch? `doctor`'s cross-check, retaken across
models and both backends on the CPU:

  stopwatch — the wall time of a run of 3N measured steps minus that of a run of N, over 2N, each
              run's wall time taken from the engine's own events (the start of its measured phase
              to its last sample), so setup and compilation stay out of it;
  headline  — the engine's step time over the same 2N steps, from the total measured time each run
              reports (what `doctor` holds the stopwatch against, within its 3%);
  median    — the median step time the 3N-step run reports, the one the card shows beside the headline.

The pairs of runs are `doctor`'s own (dashbench.engine.doctor.stopwatch_check), at each model's shape
here; each try is one pair, and a row's figure is the median of its tries' ratios with their
interquartile range (bench/paired.py). Keras picks its backend once per process, so each backend's
rows run in a child process of this script (`--child`). The load average before and after each row
and what other processes used of the cores over it (engine.hostload) are reported beside it.
Writes its table into docs/PERFORMANCE.md between <!-- stopwatch --> markers.

    python bench/stopwatch_check.py                       # the default rows, writes docs/PERFORMANCE.md
    python bench/stopwatch_check.py --models conv2d --backends jax --steps 10 --tries 2 --no-write
    python bench/stopwatch_check.py --shape llama:seq_len=64,width=64,batch_size=8 --steps 40 --tries 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from datetime import date
from pathlib import Path

import paired  # bench/, on sys.path when a script here runs
from docs_block import write_block

from dashbench.engine.doctor import STOPWATCH_TOLERANCE

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "PERFORMANCE.md"
MARKER = "stopwatch"
CHILD_RESULT = "STOPWATCH-CHILD-RESULT "  # the line a child prints its rows on (JSON after the marker)
BACKENDS = ("tensorflow", "jax")
# Tiny to small shapes, one step in each host call as doctor's runs have: the doctor's own conv2d,
# the Fashion-MNIST CNN at a small width, and a two-layer LM.
SHAPES = {
    "conv2d": {"batch_size": 16, "image_size": 64, "width": 16},
    "fashion_mnist_cnn": {"batch_size": 32, "width": 8},
    "llama": {"batch_size": 4, "seq_len": 32, "width": 32, "layers": 2},
}
RUN_FIELDS = {"warmup": 3, "steps_per_loop": 1}


def parse_shape(text: str) -> tuple[str, dict]:
    """`llama:seq_len=64,width=64` → ("llama", {"seq_len": 64, "width": 64})."""
    model, _, fields = text.partition(":")
    shape = {}
    for field in filter(None, fields.split(",")):
        key, sep, value = field.partition("=")
        if not sep or not value.strip().isdigit():
            raise argparse.ArgumentTypeError(f"{text!r}: write MODEL:key=integer,key=integer")
        shape[key.strip()] = int(value)
    if not model:
        raise argparse.ArgumentTypeError(f"{text!r}: name the model before the colon")
    return model, shape


def shapes_of(args) -> dict[str, dict]:
    """The rows' models and shapes: --models picks among SHAPES; --shape sets (or adds) a model's fields."""
    given = dict(args.shape or [])
    names = args.models.split(",") if args.models else [*SHAPES, *(m for m in given if m not in SHAPES)]
    return {name: {**SHAPES.get(name, {}), **given.get(name, {})} for name in names}


# --- in a child: one backend's rows ---------------------------------------------------------------


def measure(backend: str, model: str, shape: dict, steps: int, tries: int) -> dict:
    """One row: doctor's pairs of runs at `shape`, with the load before and after and over the row."""
    from dashbench.engine import doctor, hostload

    load_before, window = paired.load_now(), hostload.Window()
    found, _ = doctor.stopwatch_check(backend, "cpu", steps, tries, {"model": model, **RUN_FIELDS, **shape})
    return {
        "backend": backend,
        "model": model,
        "shape": shape,
        "steps": steps,
        "tries": found["tries"],
        "load_before": load_before,
        "load_after": paired.load_now(),
        "host_load": window.close(),
    }


def child(args) -> int:
    rows = []
    for model, shape in shapes_of(args).items():
        rows.append(measure(args.child, model, shape, args.steps, args.tries))
        print(f"{args.child} {model}: {summarize(rows[-1])['text']}", file=sys.stderr, flush=True)
    print(CHILD_RESULT + json.dumps(rows), flush=True)
    return 0


def run_child(args, backend: str) -> list[dict]:
    command = [sys.executable, __file__, "--child", backend, "--steps", str(args.steps), "--tries", str(args.tries)]
    command += ["--models", ",".join(shapes_of(args))]
    for model, shape in shapes_of(args).items():
        if shape:
            command += ["--shape", f"{model}:" + ",".join(f"{k}={v}" for k, v in shape.items())]
    env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    lines = [line for line in done.stdout.splitlines() if line.startswith(CHILD_RESULT)]
    if done.returncode or not lines:
        raise RuntimeError(f"the {backend} child failed, exit {done.returncode}")
    return json.loads(lines[-1][len(CHILD_RESULT) :])


# --- the figures -----------------------------------------------------------------------------------


def summarize(row: dict) -> dict:
    """Per try: the stopwatch's step time over 2N steps, against the headline's and the median step's
    time; the spread of each ratio over the tries (None where no try gave one), and ms per step."""
    steps, stopwatch, against = row["steps"], [], {"headline": [], "median": []}
    for pair in row["tries"]:
        watch = (pair["wall_long_s"] - pair["wall_short_s"]) / (2 * steps)
        stopwatch.append(watch)
        for name, key in (("headline", "engine_step_s"), ("median", "median_step_s")):
            if pair.get(key) and watch > 0:
                against[name].append(watch / pair[key])
    ms = {
        "stopwatch": 1000 * statistics.median(stopwatch),
        **{
            name: _median_ms([p.get(key) for p in row["tries"]])
            for name, key in (("headline", "engine_step_s"), ("median", "median_step_s"))
        },
    }
    ratios = {name: paired.spread(values) if values else None for name, values in against.items()}
    text = "  ".join(f"{name} {_ratio(s)}" for name, s in ratios.items())
    return {"ms": ms, "ratios": ratios, "text": f"stopwatch / {text}"}


def _median_ms(values: list) -> float | None:
    found = [v for v in values if v]
    return 1000 * statistics.median(found) if found else None


def _ratio(s: dict | None) -> str:
    return "—" if s is None else f"{s['median']:.3f} [{s['q1']:.3f}–{s['q3']:.3f}]"


def _within(s: dict | None, tolerance: float) -> str:
    if s is None:
        return "no ratio"
    return "yes" if abs(s["median"] - 1.0) <= tolerance else "**no**"


def render(rows: list[dict], measured: str, commit: str, tolerance: float = STOPWATCH_TOLERANCE) -> str:
    lines = [
        "## The stopwatch against the reported step (`bench/stopwatch_check.py`)",
        "",
        f"On the CPU, measured {measured}, commit {commit}, {rows[0]['load_before']['cpus']} CPUs. Each try is "
        f"`doctor`'s pair of runs of one model ({_steps(RUN_FIELDS['steps_per_loop'])} per host call, "
        f"{RUN_FIELDS['warmup']} warm-up steps): N and 3N measured steps. "
        "The stopwatch's step time is the 3N run's wall time minus the N run's, over 2N, each from the start of "
        "the measured phase to the last sample, so setup and compilation stay out. It is held against the "
        "engine's own step time over the same 2N steps from each run's total measured time (the headline's; "
        f"`doctor` allows {tolerance:.0%}) and against the median step time the 3N run reports (what the card "
        "shows beside the headline). A ratio above 1: the stopwatch saw the steps take longer than the engine "
        "reports. Each figure is the median of the tries' ratios [interquartile range]; ms per step are the "
        "tries' medians. Load: the load average (1/5/15 min) before → after the row, and what other processes "
        "used of the cores over it.",
        "",
        "| model (shape) | backend | tries | steps N / 3N | ms/step stopwatch | ms/step headline | ms/step median | "
        f"stopwatch / headline step | stopwatch / median step | within {tolerance:.0%} (headline / median) | load |",
        "|---|---|---:|---|---:|---:|---:|---|---|---|---|",
    ]
    for row in rows:
        s = summarize(row)
        shape = ", ".join(f"{k} {v}" for k, v in row["shape"].items())
        ms = " | ".join("—" if s["ms"][n] is None else f"{s['ms'][n]:.2f}" for n in ("stopwatch", "headline", "median"))
        lines.append(
            f"| `{row['model']}` ({shape}) | {row['backend']} | {len(row['tries'])} | {row['steps']} / "
            f"{3 * row['steps']} | {ms} | {_ratio(s['ratios']['headline'])} | {_ratio(s['ratios']['median'])} | "
            f"{_within(s['ratios']['headline'], tolerance)} / {_within(s['ratios']['median'], tolerance)} | "
            f"{paired.render_load(row['load_before'], row['load_after'], [], short=True)}{_others(row['host_load'])} |"
        )
    return "\n".join(lines)


def _steps(k: int) -> str:
    return f"{k} step{'s' if k > 1 else ''}"


def _others(host_load: dict) -> str:
    if not host_load or "other_cores" not in host_load:
        return ""
    return f"; others used {host_load['other_cores']:.2f} of {host_load['cores']} cores"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=None, help=f"comma-separated (default: {', '.join(SHAPES)})")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated: tensorflow, jax")
    p.add_argument(
        "--shape", action="append", type=parse_shape, metavar="MODEL:key=N,...", help="a model's shape fields"
    )
    p.add_argument("--steps", type=int, default=20, help="N: each try runs N and 3N measured steps")
    p.add_argument("--tries", type=int, default=3, help="pairs of runs per row")
    p.add_argument("--no-write", action="store_true", help="print only; leave the docs page alone")
    p.add_argument("--doc", default=str(DOC), help="the page the table is written into")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the rows to PATH as JSON")
    p.add_argument("--render-json", default=None, metavar="PATH", help="measure nothing: the table from --json")
    p.add_argument("--child", choices=BACKENDS, default=None, help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.child:
        return child(args)
    if args.render_json:
        saved = json.loads(Path(args.render_json).read_text())
    else:
        saved = {"measured": date.today().isoformat(), "commit": _commit(), "rows": []}
        for backend in args.backends.split(","):
            saved["rows"] += run_child(args, backend)
            if args.json:  # a later backend's failure loses none of these
                Path(args.json).write_text(json.dumps(saved, indent=1))
    text = render(saved["rows"], saved["measured"], saved["commit"])
    print(text)
    if not args.no_write:
        write_block(Path(args.doc), MARKER, text)
    return 0


def _commit() -> str:
    from dashbench.engine import envinfo

    return envinfo.git_commit()


if __name__ == "__main__":
    sys.exit(main())
