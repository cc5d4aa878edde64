"""A preset run beside its article: the run's validation accuracy per epoch and the time of its epochs,
next to the published times (`preset` and `show` print it)."""

from __future__ import annotations

import math

from dashbench.results.result import RunResult
from dashbench.workloads import presets


def article_lines(spec, result: RunResult) -> list[str]:
    """For a run of a preset that trains for epochs (the Colab article's Fashion-MNIST): its validation accuracy
    per epoch and the time of its epochs, next to the article's published times (reference rows in
    seconds). Empty for any other run."""
    from dashbench.costs import reference
    from dashbench.results import accuracy_text

    preset = presets.for_run(spec)
    accuracy = result.accuracy if result is not None else None
    if preset is None or not isinstance(accuracy, dict) or not accuracy.get("runs"):
        return []
    rows = reference.rows().set_index("key")
    timed = [key for key in preset.references if key in rows.index and rows.loc[key, "figure_unit"] == "s"]
    if not timed:
        return []
    first = accuracy["runs"][0]
    by_epoch = [p for p in first.get("curve") or [] if _finite(p.get("epoch")) and float(p["epoch"]).is_integer()]
    accuracies = ", ".join(f"{p['val_accuracy']:.4f}" for p in by_epoch if _finite(p.get("val_accuracy")))
    epochs = len(by_epoch) or accuracy.get("epochs")
    compile_s = accuracy.get("compile_s") if _finite(accuracy.get("compile_s")) else 0.0
    total = first.get("total_s")
    lines = [f"this run (seed {first.get('seed')}): validation accuracy after each epoch {accuracies or '—'}"]
    if _finite(total):
        lines.append(
            f"this run: {epochs} epochs in {accuracy_text.seconds(total)} (training and evaluation), "
            f"{accuracy_text.seconds(total + compile_s)} with the compile, as model.fit's wall time counted it"
        )
    for key in timed:
        row = rows.loc[key]
        lines.append(
            f"published: {row['name']}: {row['figure_text']} ({row['source']}"
            + (f"; {row['note']}" if isinstance(row["note"], str) and row["note"] else "")
            + ")"
        )
    return lines


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
