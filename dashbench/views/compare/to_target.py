"""Time and cost to a target accuracy per device, measured and predicted.

A to-accuracy run stores its seeds' times to the target (RunResult.accuracy). Here they become time
and cost per device, and, for every other device that has a throughput run of the same setup, a
prediction from the epochs the run needed (see predict). No Streamlit and no TensorFlow here.
"""

from __future__ import annotations

import statistics
from typing import Iterable, Optional

from dashbench.core.spec import has_held_out
from dashbench.views.common.format import DEFAULT_BACKEND, PRECISION_SHORT, is_missing, is_number, shape_text
from dashbench.views.common.stored_runs import accuracy_of

# A setup without its device: what makes epochs to target the same wherever it trains (model, shapes,
# global batch, precision). The columns are the store's runs frame's; batch_size is the global batch.
SETUP_COLUMNS = ("model", "batch_size", "precision", "image_size", "seq_len", "width")
# Where a setup runs: two backends, or two replica counts of one CPU, are two devices here.
DEVICE_COLUMNS = ("accelerator", "accelerator_count", "replicas", "backend")
# A throughput these flags mark is not the device's: it is left out of predictions.
INVALID_THROUGHPUT_FLAGS = frozenset(("above_peak", "placement_mismatch", "non_finite_loss"))
# Statuses whose training throughput was measured to the end (a to-accuracy run is a throughput run too).
MEASURED_STATUSES = ("done", "not_reached")
THROUGHPUT_RUNS = 200  # newest runs of one setup read to find each device's throughput (bounded at 100k runs)
FOUND_READS = 20  # results of other to-accuracy runs of a setup read at most (for the measured rows and errors)
MEASURED_KIND, PREDICTED_KIND = "measured", "predicted"


def _value(row, name):
    value = row.get(name) if hasattr(row, "get") else None
    return None if is_missing(value) else value


def _int(value) -> Optional[int]:
    return int(value) if is_number(value) else None


def setup_key(row) -> tuple:
    """The setup of a runs-frame row, a stored run's spec or a result dict: (model, global batch,
    precision, image_size, seq_len, width); a missing shape override is the full-size default."""
    batch = _value(row, "batch_size") or _value(row, "global_batch_size")
    return (
        _value(row, "model"),
        _int(batch),
        _value(row, "precision") or "float32",
        *(_int(_value(row, name)) for name in ("image_size", "seq_len", "width")),
    )


def setup_text(key: tuple) -> str:
    model, batch, precision, image_size, seq_len, width = key
    shape = shape_text({"model": model, "image_size": image_size, "seq_len": seq_len, "width": width})
    parts = [str(model), f"b{batch}", PRECISION_SHORT.get(precision, str(precision))] + ([shape] if shape else [])
    return " · ".join(parts)


def device_key(row) -> tuple:
    """(accelerator, count, replicas, backend) of a runs-frame row or result dict."""
    count = _int(_value(row, "accelerator_count")) or 1
    replicas = _int(_value(row, "replicas")) or count
    return (
        _value(row, "accelerator") or str(_value(row, "device") or "?").upper(),
        count,
        replicas,
        _value(row, "backend") or DEFAULT_BACKEND,
    )


def device_text(key: tuple) -> str:
    """ "CPU · tensorflow", "4×TPU v2 · jax", "CPU (2 replicas) · tensorflow"."""
    accelerator, count, replicas, backend = key
    text = f"{count}×{accelerator}" if count > 1 else str(accelerator)
    if replicas != count:
        text += f" ({replicas} replicas)"
    return f"{text} · {backend}"


def spread(values: Iterable[float]) -> tuple[Optional[float], Optional[float], Optional[float]]:
    """(median, min, max) of the numbers given, Nones when there are none."""
    numbers = [float(v) for v in values if is_number(v)]
    if not numbers:
        return None, None, None
    return statistics.median(numbers), min(numbers), max(numbers)


def seed_times(block: dict) -> list[float]:
    """The reached seeds' times to target (first training step to the end of the evaluation that
    reached it, evaluations included), in seed order."""
    return [
        float(r["time_to_target_s"])
        for r in block.get("runs", [])
        if r.get("reached") and is_number(r.get("time_to_target_s"))
    ]


def target_of(block: dict) -> tuple:
    """What a time to target means: (target, dataset name, steps per epoch). Runs agreeing on it are
    comparable; a run to 0.9 says nothing of the time to 0.95."""
    dataset = block.get("dataset") or {}
    return block.get("target"), dataset.get("name"), block.get("steps_per_epoch")


def usd(seconds: Optional[float], usd_per_hour: Optional[float]) -> Optional[float]:
    """Cost of `seconds` on a device billed `usd_per_hour` (None without either)."""
    if not is_number(seconds) or not is_number(usd_per_hour):
        return None
    return float(seconds) * float(usd_per_hour) / 3600.0


def eval_to_target_s(seed_run: dict) -> float:
    """The evaluation seconds a seed spent until it reached the target: its eval_s times the share of
    its evaluations made by then (each evaluates the whole held-out split, so they take alike)."""
    eval_s = seed_run.get("eval_s")
    if not is_number(eval_s):
        return 0.0
    curve = seed_run.get("curve") or []
    steps = seed_run.get("steps_to_target")
    if curve and is_number(steps):
        done = sum(1 for point in curve if is_number(point.get("step")) and point["step"] <= steps)
        return float(eval_s) * done / len(curve)
    return float(eval_s)


def predict_seconds(seed_run: dict, examples_per_epoch: float, source_eps: float, target_eps: float) -> Optional[float]:
    """One seed's time to target on a device training `target_eps` examples/s, from the epochs it took
    on the source device (`source_eps`): epochs to target × examples per epoch ÷ target_eps for the
    training, plus the source's evaluation time until the target scaled by source_eps ÷ target_eps (an
    evaluation is a forward pass over the held-out split, assumed to speed up as training does).
    Epochs to target do not depend on the device for one setup (model, shapes, global batch,
    precision); convergence parity (views.parity) checks that they really do not."""
    epochs = seed_run.get("epochs_to_target")
    if not seed_run.get("reached") or not is_number(epochs):
        return None
    if not (is_number(source_eps) and is_number(target_eps) and source_eps > 0 and target_eps > 0):
        return None
    return float(epochs) * examples_per_epoch / target_eps + eval_to_target_s(seed_run) * source_eps / target_eps


def examples_per_epoch(block: dict, result: dict) -> Optional[float]:
    """What an epoch holds in the unit throughput counts: examples, or an LM's tokens."""
    steps = block.get("steps_per_epoch")
    batch = result.get("global_batch_size")
    per_example = (block.get("dataset") or {}).get("tokens_per_example", 1)
    per_example = per_example if is_number(per_example) and per_example > 0 else 1
    return float(steps) * float(batch) * float(per_example) if is_number(steps) and is_number(batch) else None


def device_throughputs(runs: list[dict]) -> dict[tuple, dict]:
    """{device key: {"examples_per_sec": median, "runs": n}} over runs-frame rows of one setup whose
    throughput counts (a finished status, no flag that voids it)."""
    by_device: dict[tuple, list[float]] = {}
    for row in runs:
        eps = row.get("examples_per_sec")
        flags = set(row.get("flags") or [])
        if (
            row.get("status") not in MEASURED_STATUSES
            or not is_number(eps)
            or eps <= 0
            or flags & INVALID_THROUGHPUT_FLAGS
        ):
            continue
        by_device.setdefault(device_key(row), []).append(float(eps))
    return {key: {"examples_per_sec": statistics.median(v), "runs": len(v)} for key, v in by_device.items()}


# ------------------------------------------------------------------------------- the table


def measured_row(run: dict, price_of) -> dict:
    """A to-accuracy run (a runs-frame record with its "accuracy" block) as one row of the table."""
    block = run["accuracy"]
    times = seed_times(block)
    median, low, high = spread(times)
    rate = price_of(run)
    device = device_key(run)
    return {
        "kind": MEASURED_KIND,
        "device": device_text(device),
        "device_key": device,
        "setup": setup_key(run),
        "run_id": run.get("run_id"),
        "source": "measured",
        "target": block.get("target"),
        "dataset": (block.get("dataset") or {}).get("name"),
        "steps_per_epoch": block.get("steps_per_epoch"),
        "seeds": len(block.get("runs", [])),
        "reached": len(times),
        "epochs_to_target": spread(r.get("epochs_to_target") for r in block["runs"] if r.get("reached"))[0],
        "time_to_target_s": median,
        "time_min_s": low,
        "time_max_s": high,
        "usd_per_hour": rate,
        "usd_to_target": usd(median, rate),
        "usd_min": usd(low, rate),
        "usd_max": usd(high, rate),
        "examples_per_sec": run.get("examples_per_sec"),
        "error": None,
    }


def predicted_rows(source: dict, throughputs: dict[tuple, dict], price_of) -> list[dict]:
    """The source run's time and cost to target predicted on every other device with a throughput of
    its setup (throughputs: device_throughputs of that setup), seed by seed (see predict_seconds)."""
    block = source["accuracy"]
    if block.get("target") is None:
        return []
    per_epoch = examples_per_epoch(block, {"global_batch_size": source.get("batch_size")})
    source_eps = source.get("examples_per_sec")
    own = device_key(source)
    rows = []
    for device, measured in throughputs.items():
        if device == own or per_epoch is None:
            continue
        times = [predict_seconds(r, per_epoch, source_eps, measured["examples_per_sec"]) for r in block["runs"]]
        times = [t for t in times if t is not None]
        if not times:
            continue
        median, low, high = spread(times)
        rate = price_of(
            {"accelerator": device[0], "accelerator_count": device[1], "host_cpus": measured.get("host_cpus")}
        )
        rows.append(
            {
                "kind": PREDICTED_KIND,
                "device": device_text(device),
                "device_key": device,
                "setup": setup_key(source),
                "run_id": source.get("run_id"),
                "source": f"predicted from the epochs measured on {device_text(own)}",
                "target": block.get("target"),
                "dataset": (block.get("dataset") or {}).get("name"),
                "steps_per_epoch": block.get("steps_per_epoch"),
                "seeds": len(block["runs"]),
                "reached": len(times),
                "epochs_to_target": spread(r.get("epochs_to_target") for r in block["runs"] if r.get("reached"))[0],
                "time_to_target_s": median,
                "time_min_s": low,
                "time_max_s": high,
                "usd_per_hour": rate,
                "usd_to_target": usd(median, rate),
                "usd_min": usd(low, rate),
                "usd_max": usd(high, rate),
                "examples_per_sec": measured["examples_per_sec"],
                "error": None,
            }
        )
    return rows


def target_rows(chosen: list[dict], found: list[dict], throughput: list[dict], price_of) -> list[dict]:
    """Measured rows of the chosen to-accuracy runs (and of those `found` of their setups on other
    devices), then each chosen run's predictions on the other devices with a throughput run
    (`throughput`: runs-frame records of the setups). A prediction's `error` is (predicted − measured)
    ÷ measured median time against the newest measured run on that device with the same setup,
    target, dataset and steps per epoch. `price_of(row)` gives a device's USD per hour (None: no price).
    Chosen and found runs are runs-frame records with their "accuracy" block."""
    chosen_ids = {run.get("run_id") for run in chosen}
    measured = [measured_row(run, price_of) for run in chosen]
    seen = {(r["setup"], r["device_key"], r["target"], r["dataset"], r["steps_per_epoch"]) for r in measured}
    for run in found:  # newest first: one per device and target is enough beside the chosen ones
        if run.get("run_id") in chosen_ids:
            continue
        row = measured_row(run, price_of)
        key = (row["setup"], row["device_key"], row["target"], row["dataset"], row["steps_per_epoch"])
        if key not in seen and row["target"] is not None:
            seen.add(key)
            measured.append(row)
    by_setup: dict[tuple, list[dict]] = {}
    for row in throughput:
        by_setup.setdefault(setup_key(row), []).append(row)
    predicted = []
    for run in chosen:
        rows = by_setup.get(setup_key(run), [])
        throughputs = device_throughputs(rows)
        for device, figures in throughputs.items():  # a CPU is priced by the host's CPUs
            figures["host_cpus"] = next((r.get("host_cpus") for r in rows if device_key(r) == device), None)
        predicted += predicted_rows(run, throughputs, price_of)
    for row in predicted:
        same = [
            m
            for m in measured
            if (m["setup"], m["device_key"], m["target"], m["dataset"], m["steps_per_epoch"])
            == (row["setup"], row["device_key"], row["target"], row["dataset"], row["steps_per_epoch"])
            and is_number(m["time_to_target_s"])
        ]
        if same and is_number(row["time_to_target_s"]):
            row["error"] = (row["time_to_target_s"] - same[0]["time_to_target_s"]) / same[0]["time_to_target_s"]
            row["measured_run_id"] = same[0]["run_id"]
    return measured + predicted


def price_function(catalog):
    """price_of(row) for target_rows: the on-demand USD per hour the catalog asks for the row's
    device (accelerator, accelerator_count, host_cpus), as Compare's cost per run is priced."""
    from dashbench.costs import run_cost

    match = run_cost.matcher(catalog) if catalog is not None else None

    def price_of(row) -> Optional[float]:
        if match is None:
            return None
        price = match(row.get("accelerator"), row.get("accelerator_count"), row.get("host_cpus"))
        return price["usd_per_hour"] if price else None

    return price_of


def gather(store, run_ids: Iterable[str]) -> tuple[list[dict], list[dict], list[dict]]:
    """(chosen, found, throughput) for target_rows, read from `store` (a Store or the pages' cached
    one): only the chosen runs' results, and per setup of a chosen to-accuracy run its newest
    THROUGHPUT_RUNS finished runs and the results of those among them that used real data, so the
    cost does not grow with the store."""
    from dashbench.core.frames import records

    ids = list(run_ids)
    if not ids:
        return [], [], []
    frame = store.runs(run_ids=ids)
    chosen = []
    for row in records(frame):
        if not has_held_out(row.get("model"), row.get("data")) and row.get("status") in MEASURED_STATUSES:
            continue  # a throughput run: it has no held-out split, so no accuracy block
        block = _stored_accuracy(store, row["run_id"])
        if block is not None:
            chosen.append({**row, "accuracy": block})
    found, throughput = [], []
    for key in dict.fromkeys(setup_key(run) for run in chosen):
        model, batch, precision = key[:3]
        rows = [
            r
            for r in records(
                store.runs(
                    model=model,
                    batch_size=batch,
                    precision=precision,
                    status=list(MEASURED_STATUSES),
                    limit=THROUGHPUT_RUNS,
                )
            )
            if setup_key(r) == key
        ]
        throughput += rows
        others = [r for r in rows if has_held_out(r.get("model"), r.get("data")) and r["run_id"] not in ids]
        for row in others[:FOUND_READS]:  # newest first
            block = _stored_accuracy(store, row["run_id"])
            if block is not None:
                found.append({**row, "accuracy": block})
    return chosen, found, throughput


def _stored_accuracy(store, run_id: str) -> Optional[dict]:
    run = store.get_run(run_id)
    return accuracy_of(run.get("result")) if run else None
