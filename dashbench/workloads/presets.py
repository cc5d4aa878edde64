"""The seed articles' experiments as one-click presets. No TensorFlow here.

A preset fixes the model and, per device class, the batch size and steps the article used; the
user picks the device. `spec_for` turns one into a RunSpec; `quick_spec` does so with its model's
quick recipe (its registry entry: shapes, batch size, steps) that lets a CPU try it in seconds.
Runs made from a preset are labelled "preset:<slug>" so the dashboard can put them next to the
preset's published rows (`references`, keys of dashbench.reference.rows()).
"""

from __future__ import annotations

import math
import re
from typing import Optional

from dashbench.core.spec import RunSpec, SpecError
from dashbench.workloads import catalog, registry
from dashbench.workloads.preset_rows import (
    LABEL_PREFIX,
    OVERRIDABLE,
    TO_ACCURACY_FIELDS,
    Preset,
    checked_class,
)

# Every preset by slug, in the registry's order of workloads (each entry lists its own).
PRESETS: dict[str, Preset] = {p.slug: p for w in registry.builtins() for p in w.presets}


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", str(text).lower())


def get(name: str) -> Preset:
    """A preset by slug ("riseml-resnet50") or name ("RiseML ResNet-50 ..."), case and punctuation aside."""
    wanted = _squash(name)
    for preset in PRESETS.values():
        if wanted in (_squash(preset.slug), _squash(preset.name)):
            return preset
    raise SpecError("preset", f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")


def quick_recipe(preset: Preset) -> dict:
    """A CPU try in seconds: its model's quick recipe (dashbench.workloads.registry), the one `models` prints."""
    return registry.get(preset.model).quick_recipe()


def label_for(name: str) -> str:
    return LABEL_PREFIX + get(name).slug


def spec_for(name: str, device_class: str, check: bool = True, **overrides) -> RunSpec:
    """The RunSpec for a preset on a device class; None-valued overrides are ignored.

    Overriding `steps` alone keeps the spec valid: steps_per_loop falls to a divisor of the new
    steps and the warm-up to at most the new steps, so `steps=2` really is a short try. A preset that
    trains to accuracy (Fashion-MNIST's 5 epochs) given data synthetic measures throughput only; a
    target given drops its fixed epoch count (the two exclude each other).
    `check`: the workload's checks too (its real data's files): False only to fill a form."""
    preset = get(name)
    values = {"model": preset.model, "device": checked_class(device_class), "label": LABEL_PREFIX + preset.slug}
    values.update(preset.settings(device_class))
    overrides = {k: v for k, v in overrides.items() if v is not None}
    for key in overrides:
        if key not in OVERRIDABLE:
            raise SpecError(key, f"not a preset override; choose from: {', '.join(OVERRIDABLE)}")
    if "steps" in overrides:
        steps = overrides["steps"]
        if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
            if "steps_per_loop" not in overrides:
                values["steps_per_loop"] = math.gcd(steps, values["steps_per_loop"])
            if "warmup" not in overrides:
                values["warmup"] = min(values["warmup"], steps)
    if overrides.get("data") == "synthetic":
        for key in TO_ACCURACY_FIELDS:
            if key not in overrides:
                values.pop(key, None)
    if (
        overrides.get("target_accuracy") is not None or overrides.get("target_loss") is not None
    ) and "epochs" not in overrides:
        values.pop("epochs", None)
    values.update(overrides)
    spec = RunSpec.from_dict(values)
    if not check:
        return spec
    # The workload's own checks (which overrides it takes, its smallest image, real data's files) run
    # here, before a process or TensorFlow starts; its metadata imports no TensorFlow.
    catalog.check_spec(spec)
    return spec


def quick_spec(name: str, device_class: str = "cpu", check: bool = True, **overrides) -> RunSpec:
    """The preset with its tiny CPU-try shapes (and any further overrides on top). A preset that trains
    for epochs keeps its epoch count with the quick steps in each (5 epochs × 4 steps)."""
    preset = get(name)
    quick = quick_recipe(preset)
    if preset.per_device["cpu"].get("epochs") and overrides.get("data") != "synthetic":
        quick.setdefault("steps_per_epoch", quick["steps"])
    return spec_for(name, device_class, check=check, **{**quick, **overrides})


def for_run(spec_or_label) -> Optional[Preset]:
    """The preset a run was made from, through its label, or None."""
    label = (
        spec_or_label.get("label")
        if isinstance(spec_or_label, dict)
        else getattr(spec_or_label, "label", spec_or_label)
    )
    if isinstance(label, str) and label.startswith(LABEL_PREFIX):
        return PRESETS.get(label[len(LABEL_PREFIX) :])
    return None
