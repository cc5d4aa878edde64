"""RunResult.check's rules, one per stored key: does a result's JSON hold only what the engine
writes (types, finite numbers >= 0, known flags)? Each raises ValueError "field: why"."""

from __future__ import annotations

import math

from dashbench.core import accuracy as accuracy_shape
from dashbench.core import stats
from dashbench.workloads import model_file

_INT_LIMIT = 2**63  # what SQLite's INTEGER holds


def _fail(name: str, what: str, value) -> None:
    shown = repr(value)
    raise ValueError(f"{name}: must be {what}, got {shown if len(shown) <= 60 else shown[:57] + '...'}")


def _text_or_null(name, value, finite):
    if value is not None and not isinstance(value, str):
        _fail(name, "text or null", value)


def _text(name, value, finite):
    if not isinstance(value, str):
        _fail(name, "text", value)


def _count_or_null(name, value, finite):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < _INT_LIMIT):
        _fail(name, "a whole number >= 0 or null", value)


def _amount_or_null(name, value, finite):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(name, "a number or null", value)
    if finite and not (math.isfinite(value) and value >= 0):
        _fail(name, "a finite number >= 0 or null", value)


def _bool(name, value, finite):
    if not isinstance(value, bool):
        _fail(name, "true or false", value)


def _texts(name, value, finite=True):
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        _fail(name, "a list of text", value)


def _flags(name, value, finite):
    _texts(name, value)
    unknown = [v for v in value if v not in stats.FLAGS]
    if unknown:
        _fail(name, f"a list of known flags ({', '.join(stats.FLAGS)})", unknown[0])


def _ci95(name, value, finite):
    if not isinstance(value, list) or len(value) != 2:
        _fail(name, "a list [low, high]", value)
    for i, bound in enumerate(value):
        _amount_or_null(f"{name}[{i}]", bound, finite)


def _losses(name, value, finite):
    if not isinstance(value, list):
        _fail(name, "a list", value)
    for i, loss in enumerate(value):
        if loss is not None and not (_number(loss) if finite else isinstance(loss, (int, float))):
            _fail(f"{name}[{i}]", "a finite number or null", loss)


def _placement(name, value, finite):
    if not isinstance(value, dict):
        _fail(name, "an object", value)
    for key, devices in value.items():
        _texts(f"{name}.{key}", devices)


def _amounts_or_null(name, value, finite):
    if value is None:
        return
    if not isinstance(value, list):
        _fail(name, "a list of numbers", value)
    for index, item in enumerate(value):
        _amount_or_null(f"{name}[{index}]", item, finite)


def _object_or_null(name, value, finite):
    if value is not None:
        _object(name, value, finite)


def _object(name, value, finite):
    if not isinstance(value, dict):
        _fail(name, "an object", value)


_RULES = {
    "model": _text_or_null,
    "unit": _text,
    "device": _text_or_null,
    "backend": _text_or_null,
    "backend_version": _text_or_null,
    "accelerator": _text_or_null,
    "repeats": _amounts_or_null,
    "repeat_cv": _amount_or_null,
    "host_load": _object_or_null,
    "accelerator_count": _count_or_null,
    "device_names": _texts,
    "replicas": _count_or_null,
    "global_batch_size": _count_or_null,
    "per_replica_batch_size": _count_or_null,
    "precision": _text_or_null,
    "xla": _bool,
    "data": _text_or_null,
    "status": _text,
    "examples_per_sec": _amount_or_null,
    "examples_per_sec_ci95": _ci95,
    "step_time_median_s": _amount_or_null,
    "step_time_p10_s": _amount_or_null,
    "step_time_p90_s": _amount_or_null,
    "step_time_std_s": _amount_or_null,
    "samples": _count_or_null,
    "steps": _count_or_null,
    "steps_per_loop": _count_or_null,
    "compile_s": _amount_or_null,
    "flops_per_example": _amount_or_null,
    "forward_flops_per_example": _amount_or_null,
    "flops_source": _text_or_null,
    "analytic_flops_per_example": _amount_or_null,
    "compiler_flops_per_example": _amount_or_null,
    "achieved_tflops": _amount_or_null,
    "peak_tflops": _amount_or_null,
    "peak_source": _text_or_null,
    "peak_as_of": _amount_or_null,
    "mfu": _amount_or_null,
    "flags": _flags,
    "losses": _losses,
    "placement": _placement,
    "shapes": _object,
    "env": _object,
    "spec": _object,
    "run_id": _text_or_null,
    "memory": lambda n, v, f: _memory(n, v, f),
    "accuracy": accuracy_shape.check,
    "store_outage": _object_or_null,
    "model_info": lambda n, v, f: model_file.check_info(n, v),
}

MEMORY_BYTES = ("peak_bytes", "window_peak_bytes", "capacity_bytes", "host_peak_bytes", "estimate_bytes")
MEMORY_KEYS = (*MEMORY_BYTES, "kind", "source", "devices", "estimate_ratio", "estimate_source")
DEVICE_MEMORY_KEYS = ("name", "peak_bytes", "window_peak_bytes", "capacity_bytes")


def _memory(name, value, finite):
    if value is None:
        return
    _object(name, value, finite)
    for key in value:
        if key not in MEMORY_KEYS:
            _fail(
                f"{name}.{key}" if isinstance(key, str) and key.isidentifier() else name,
                f"one of the keys {', '.join(MEMORY_KEYS)}",
                key,
            )
    for key in MEMORY_BYTES:
        _count_or_null(f"{name}.{key}", value.get(key), finite)
    _amount_or_null(f"{name}.estimate_ratio", value.get("estimate_ratio"), finite)
    if value.get("kind") not in (None, "host", "device"):
        _fail(f"{name}.kind", "host, device or null", value.get("kind"))
    _text_or_null(f"{name}.source", value.get("source"), finite)
    _text_or_null(f"{name}.estimate_source", value.get("estimate_source"), finite)
    devices = value.get("devices", [])
    if not isinstance(devices, list):
        _fail(f"{name}.devices", "a list", devices)
    for index, device in enumerate(devices):
        where = f"{name}.devices[{index}]"
        _object(where, device, finite)
        for key in device:
            if key not in DEVICE_MEMORY_KEYS:
                _fail(where, f"an object of {', '.join(DEVICE_MEMORY_KEYS)}", key)
        _text_or_null(f"{where}.name", device.get("name"), finite)
        for key in DEVICE_MEMORY_KEYS[1:]:
            _count_or_null(f"{where}.{key}", device.get(key), finite)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
