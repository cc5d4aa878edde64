"""A spec's checks that need no framework: its workload's shape overrides (its registry entry,
dashbench.workloads.registry), its data's files, an LM's reachable target; and the built-ins as
`models` lists them.

The dashboard, the job queue, the presets and the run form call these before a run row exists.
"""

from __future__ import annotations

import dataclasses

from dashbench.core.spec import RunSpec, SpecError
from dashbench.workloads import lm_text, model_file, registry
from dashbench.workloads.datasets import FASHION_CLASSES, check_fashion_mnist, check_image_folder
from dashbench.workloads.registry import Shapes


def describe_all() -> list[dict]:
    return [w.describe() for w in registry.builtins()]


def check_spec(spec: RunSpec) -> Shapes:
    """Every check of `spec` that needs no TensorFlow: the workload's shape overrides and, for real
    data, that the IDX files are there and sound (headers, labels; a to-accuracy run's t10k split too);
    for an image folder, its layout (train/ and validation/ with the same classes), whose class count
    the model's output takes. Callers run it before a run row is created, so bad input is an error
    line, never a junk `failed` run. Returns the resolved shapes."""
    workload = registry.get(spec.model)
    if workload.is_file:
        model_file.check_file(spec)  # there, and unchanged since the run was set up
    shapes = workload.shapes(spec)
    if spec.data == "real":
        check_fashion_mnist(spec.data_path, FASHION_CLASSES, held_out=spec.to_accuracy)
    if spec.data == "folder":
        shapes = dataclasses.replace(shapes, classes=len(check_image_folder(spec.data_path)["classes"]))
    if spec.target_loss is not None and spec.data == "synthetic" and workload.capabilities.held_out_synthetic:
        floor = lm_text.entropy_floor(shapes.vocab, shapes.seq_len)
        # At the floor the loss only approaches the target; a run there would train to its epoch limit.
        if spec.target_loss <= floor:
            raise SpecError(
                "target_loss",
                f"{spec.target_loss:g} is at or below the teacher's entropy floor "
                f"{floor:.4f} nats (vocabulary {shapes.vocab}): no model's validation "
                f"loss gets there; use a target above it, e.g. {max(3.3, floor + 0.5):g}",
            )
    return shapes
