"""Where the Predict page's step profile comes from, without importing any user code here: a stored
run's result (its "profile"), or a child `python -m dashbench profile --model MODEL --batch-size 8 --json`
(the run-like process that builds the model); and the predictions of one profile over the catalog."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Optional

from dashbench.core.spec import SpecError
from dashbench.predict import measured, published, table

PROFILE_TIMEOUT_S = 600  # a full-size LM's abstract compile on a loaded host takes minutes
SHAPES = ("image_size", "seq_len", "width", "layers")


def stored(store) -> list[dict]:
    """Stored runs with a step profile, newest first: {label, run_id, profile}."""
    out = []
    for run in measured.runs_with_profiles(store):
        p = run["profile"]
        label = (
            f"{p.model} · batch {p.batch_size} · {p.precision} · {run.get('accelerator') or '?'} · {run['run_id'][:8]}"
        )
        out.append({"label": label, "run_id": run["run_id"], "profile": p})
    return out


def command(model: str, batch_size: int, precision: str, shape: dict) -> list[str]:
    args = [sys.executable, "-m", "dashbench", "profile", "--json", "--model", model, "--batch-size", str(batch_size)]
    args += ["--precision", precision]
    for name in SHAPES:
        if shape.get(name):
            args += ["--" + name.replace("_", "-"), str(int(shape[name]))]
    return args


def child_profile(model: str, batch_size: int, precision: str, shape: Optional[dict] = None) -> dict:
    """The profile from a child process; its refusal (one line naming the field) as a SpecError."""
    try:
        proc = subprocess.run(
            command(model, batch_size, precision, shape or {}),
            capture_output=True,
            text=True,
            timeout=PROFILE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise SpecError("model", f"profiling took longer than {PROFILE_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit code {proc.returncode}"
        field, _, why = last.removeprefix("error: ").partition(": ")
        raise SpecError(field if why else "model", why or last)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def predictions(profile, chips: int, precision: str, store=None) -> list[dict]:
    """`profile`: a stored run's (a StepProfile or a FormulaStep), or a child's JSON dict."""
    from dashbench.hardware import catalog

    step = profile
    if isinstance(profile, dict):
        from dashbench.workloads.profile import StepProfile

        step = StepProfile.from_dict(profile)
    return table.rows(step, list(catalog.chips()), chips, published.calibration(), store, precision)
