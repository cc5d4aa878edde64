"""RunResult: what was measured. Built by the engine, stored as JSON by the store, put into words here.

No TensorFlow here. The JSON keys are the stored format: `to_dict()` writes exactly the keys the
engine always wrote, and `from_dict()` reads any result JSON written since (missing keys get their
defaults, unknown ones are kept as they are).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields
from typing import Any, Optional

from dashbench import accuracy as accuracy_shape
from dashbench import model_file, peaks, stats

# The engine's flag strings, and what the user must read next to a flagged figure.
FLAG_TEXT = {
    stats.FLAG_ABOVE_PEAK: "above peak: faster than the hardware's peak, so the measurement is invalid",
    stats.FLAG_NON_FINITE_LOSS: "loss became NaN/inf",
    stats.FLAG_LOSS_NOT_FALLING: "did not converge: the loss did not fall",
    stats.FLAG_PLACEMENT_MISMATCH: "not on the chosen device: ops ran elsewhere",
    stats.FLAG_DEVICE_SHARED: "device shared: another run measured on the same device at the same time",
    stats.FLAG_CONTENDED: "contended: other processes kept the machine busy while it measured",
    stats.FLAG_UNSTABLE: "unstable: the repeats' throughputs differ by more than 5% (CV)",
    stats.FLAG_STORE_OUTAGE: "store outage: its writes waited for the store (the figures are unaffected)",
}
FLAG_SHORT = {
    stats.FLAG_ABOVE_PEAK: "above peak",
    stats.FLAG_NON_FINITE_LOSS: "NaN loss",
    stats.FLAG_LOSS_NOT_FALLING: "did not converge",
    stats.FLAG_PLACEMENT_MISMATCH: "placement mismatch",
    stats.FLAG_DEVICE_SHARED: "device shared",
    stats.FLAG_CONTENDED: "contended",
    stats.FLAG_UNSTABLE: "unstable",
    stats.FLAG_STORE_OUTAGE: "store outage",
}

# What a run is doing, in words: the engine's phase events (the CLI's progress lines, sweep lines, the
# dashboard's live panel). Any other phase (e.g. "waiting for the device …") is shown as it is.
PHASE_TEXT = {
    "setup": "setting up ({framework}, devices, model)",
    "compile": "compiling (first step)",
    "warmup": "warming up",
    "measure": "measuring",
    "probe": "probing the CPU's peak (for MFU)",
}


def phase_text(phase: Optional[str], backend: Optional[str] = "tensorflow") -> str:
    framework = {"tensorflow": "TensorFlow", "jax": "JAX"}.get(backend or "tensorflow", backend or "TensorFlow")
    return PHASE_TEXT.get(phase or "", phase or "starting").format(framework=framework)


def short_id(run_id: str) -> str:
    """How the dashboard names a run ('#0e8b0a': its id's last 6 characters); every command takes it."""
    return "#" + str(run_id)[-6:]


Figure = tuple[str, str, str]  # (label, value, detail), as a dashboard metric shows it


@dataclass(frozen=True)
class RunResult:
    # Field order is the stored JSON's key order. Every field has a default so that results written
    # by older versions (or stand-in engines in tests) still load.
    model: Optional[str] = None
    unit: str = "examples"
    device: Optional[str] = None  # the resolved kind: cpu, gpu or tpu
    backend: Optional[str] = None  # Keras backend: tensorflow | jax (None: written before backends, tensorflow)
    backend_version: Optional[str] = None  # that framework's version, e.g. "2.19.1" or "0.10.2"
    accelerator: Optional[str] = None  # "CPU", "V100", "TPU v2", ...
    accelerator_count: Optional[int] = None
    device_names: list[str] = field(default_factory=list)
    replicas: Optional[int] = None
    global_batch_size: Optional[int] = None
    per_replica_batch_size: Optional[int] = None
    precision: Optional[str] = None
    xla: bool = False
    data: Optional[str] = None
    status: str = "done"
    examples_per_sec: Optional[float] = None
    examples_per_sec_ci95: list[Optional[float]] = field(default_factory=lambda: [None, None])  # hi None: unbounded
    repeats: Optional[list[float]] = None  # each repeat's throughput (--repeats > 1); examples_per_sec is their median
    repeat_cv: Optional[float] = None  # their coefficient of variation
    step_time_median_s: Optional[float] = None
    step_time_p10_s: Optional[float] = None
    step_time_p90_s: Optional[float] = None
    step_time_std_s: Optional[float] = None
    samples: Optional[int] = None  # measured host loops
    steps: Optional[int] = None
    steps_per_loop: Optional[int] = None
    compile_s: Optional[float] = None  # tracing + compilation + the first loop; not in the throughput
    flops_per_example: Optional[float] = None  # one training step (forward + backward)
    forward_flops_per_example: Optional[float] = None
    flops_source: Optional[str] = None  # what MFU used: "analytic" where a count exists, else "compiler"
    analytic_flops_per_example: Optional[float] = None
    compiler_flops_per_example: Optional[float] = None
    achieved_tflops: Optional[float] = None
    peak_tflops: Optional[float] = None  # all accelerators used together
    peak_source: Optional[str] = None  # "datasheet" | "measured" | "calibrated" | "provisional" | None (no peak)
    mfu: Optional[float] = None
    flags: list[str] = field(default_factory=list)
    losses: list[Optional[float]] = field(default_factory=list)  # one per host loop, warm-up included
    placement: dict[str, list[str]] = field(default_factory=dict)  # variables / ops → device strings
    shapes: dict[str, Any] = field(default_factory=dict)
    # A user's model (--model file.py:build or model.keras): its file, builder, sha256, parameters,
    # inputs and outputs [{name, shape, dtype}], loss, optimizer and synthetic task (model_file.INFO_KEYS).
    model_info: Optional[dict[str, Any]] = None
    env: dict[str, Any] = field(default_factory=dict)
    host_load: Optional[dict[str, Any]] = None  # the machine during the measured window (engine.hostload)
    # Measured peak memory beside the estimate (engine/peak_memory.py): kind host|device, source, peak_bytes and
    # window_peak_bytes (summed over devices), capacity_bytes (one device's or the host's), devices [{name, peak_bytes,
    # window_peak_bytes, capacity_bytes}], host_peak_bytes, estimate_bytes, estimate_source (xla|counts), estimate_ratio.
    memory: Optional[dict[str, Any]] = None
    # A to-accuracy run's curves, time to target and seeds (dashbench/accuracy.py holds its shape).
    accuracy: Optional[dict[str, Any]] = None
    # The store unreachable while the run went (jobs/store_buffer.py): seconds, outages, text.
    store_outage: Optional[dict[str, Any]] = None
    spec: dict[str, Any] = field(default_factory=dict)
    run_id: Optional[str] = None  # set once the run is stored; absent from the JSON while None
    # Keys this version does not know (a newer writer's): kept, and written back as they came.
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in _json_fields()}
        for optional in _OMITTED_WHEN_NONE:  # absent from older results: kept absent
            if out[optional] is None:
                del out[optional]
        out.update(self.extra)
        return _copied(out)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunResult":
        if not isinstance(data, dict):
            raise TypeError(f"result: must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in _json_fields()}
        # A null where a field has a default (a list, an object, the unit) reads as that default.
        values = {k: v for k, v in _copied(data).items() if k in known and not (v is None and k in _DEFAULTED)}
        return cls(**values, extra={k: _copied(v) for k, v in data.items() if k not in known})

    @classmethod
    def check(cls, data: Any, finite: bool = True) -> None:
        """Does `data` hold only what the engine writes (types, finite numbers >= 0, known flags)?
        Raises ValueError "field: why". `finite=False` lets numbers be NaN, infinite or negative:
        a stored row may hold those and still be shown (as blanks). from_dict stays tolerant."""
        if not isinstance(data, dict):
            raise ValueError(f"must be a JSON object, got {type(data).__name__}")
        for name, value in data.items():
            rule = _RULES.get(name)
            if rule is not None and not (value is None and name in _DEFAULTED):
                rule(name, value, finite)

    def replace(self, **changes) -> "RunResult":
        return dataclasses.replace(self, **changes)

    # -- in words ----------------------------------------------------------------------------------

    def headline(self) -> str:
        """One line: what ran, where, and its throughput with the 95% interval."""
        where = self.accelerator or (self.device or "?").upper()
        if _number(self.accelerator_count):
            where += f" ×{int(self.accelerator_count)}"
        setup = []
        if _number(self.replicas):
            setup.append(f"{int(self.replicas)} replica(s)")
        if _number(self.global_batch_size):
            setup.append(f"batch {int(self.global_batch_size)}")
        if self.backend_name() != "tensorflow":
            setup.append(self.backend_name())
        if self.precision:
            setup.append(self.precision)
        if self.xla:
            setup.append("XLA")
        what = f"{self.model} on {where}" if self.model else where
        if setup:
            what += f" ({', '.join(setup)})"
        return f"{what}: {self.throughput_text()}"

    def backend_name(self) -> str:
        """The Keras backend that ran it; results from before backends existed ran on TensorFlow."""
        return self.backend or "tensorflow"

    def repeats_text(self) -> str:
        """'median of 3 repeats, CV 1.2%', or '' for a single measurement."""
        if not isinstance(self.repeats, list) or len(self.repeats) < 2 or not _number(self.repeat_cv):
            return ""
        return f"median of {len(self.repeats)} repeats, CV {self.repeat_cv:.1%}"

    def load_text(self) -> str:
        """'other processes used 1.6 of 2 cores' while it measured, 'other processes: window too
        short to measure (…)', or ''."""
        load = self.host_load if isinstance(self.host_load, dict) else {}
        parts = []
        if _number(load.get("other_cores")) and _number(load.get("cores")):
            # Held to the host's cores: runs stored before hostload held it read up to 3.8 of 2.
            other = min(max(load["other_cores"], 0), load["cores"])
            parts.append(f"other processes used {other:.2g} of {int(load['cores'])} cores")
        elif isinstance(load.get("note"), str):
            parts.append(f"other processes: {load['note']}")
        if _number(load.get("gpu_other_processes")) and load["gpu_other_processes"]:
            parts.append(f"{int(load['gpu_other_processes'])} other process(es) on the GPU")
        return "; ".join(parts)

    def throughput_text(self) -> str:
        """'1,234.5 images/s (95% CI 1,200.0–1,270.0)'."""
        value = f"{self.examples_per_sec:,.1f}" if _number(self.examples_per_sec) else "?"
        ci = stats.ci95_text(self.examples_per_sec_ci95)
        return f"{value} {self.unit}/s" + (f" ({ci})" if ci else "")

    def figures(self) -> list[Figure]:
        """The figures a finished run is judged by, as (label, value, detail): the dashboard shows
        them as metrics, `describe()` as lines."""
        throughput = []
        if _number(self.examples_per_sec):
            detail = stats.ci95_text(self.examples_per_sec_ci95)
            spread = self.repeats_text()
            throughput.append((f"{self.unit}/s", f"{self.examples_per_sec:,.1f}",
                               "; ".join(part for part in (detail, spread) if part)))
        return throughput + self._details()

    def _details(self) -> list[Figure]:
        """The figures after throughput (which the headline already holds)."""
        out: list[Figure] = []
        if _number(self.step_time_median_s):
            detail = []
            if _number(self.step_time_p10_s) and _number(self.step_time_p90_s):
                detail.append(f"p10 {_ms(self.step_time_p10_s)}, p90 {_ms(self.step_time_p90_s)}")
            if _number(self.samples):
                detail.append(f"{int(self.samples)} samples")
            out.append(("step time, median", _ms(self.step_time_median_s), ", ".join(detail)))
        if isinstance(self.model_info, dict):
            out.append(("model", *model_file.info_text(self.model_info)))
        if self.repeats_text():
            out.append(("repeats", str(len(self.repeats)), self.repeats_text()))
        if _number(self.compile_s):
            out.append(("compile + first step", f"{self.compile_s:.2f} s", "not in the throughput"))
        if self.memory_text():
            value, detail = self.memory_text()
            out.append(("peak memory", value, detail))
        if _number(self.achieved_tflops):
            # The unit sits in the label: a metric value longer than ~6 characters is cut off ("5.57 TFL…").
            out.append(("achieved TFLOP/s", f"{self.achieved_tflops:.3g}", self._tflops_detail()))
        where = self.accelerator or self.device
        if where:
            count = self.accelerator_count
            value = f"{int(count)}× {where}" if _number(count) and count > 1 else str(where)
            names = ", ".join(map(str, self.device_names))
            detail = f"{self.device}: {names}" if self.device and names else self.device or names
            out.append(("ran on", value, detail))
        return out

    def memory_text(self) -> Optional[tuple[str, str]]:
        """('1.23 GB', 'process peak (VmHWM); measured window 1.20 GB; 0.85× the estimate 1.45 GB;
        of 25.3 GB'), or None where no peak was measured."""
        mem = self.memory if isinstance(self.memory, dict) else {}
        if not _number(mem.get("peak_bytes")):
            return None
        devices = mem.get("devices") if isinstance(mem.get("devices"), list) else []
        what = "process peak (resident)" if mem.get("kind") == "host" else \
            f"device peak, {len(devices)} device(s) summed" if len(devices) > 1 else "device peak"
        parts = [what]
        if _number(mem.get("window_peak_bytes")):
            parts.append(f"measured window {_bytes(mem['window_peak_bytes'])}")
        if _number(mem.get("estimate_bytes")) and _number(mem.get("estimate_ratio")):
            by = " (XLA's memory analysis)" if mem.get("estimate_source") == "xla" else ""
            parts.append(f"{mem['estimate_ratio']:.2f}× the estimate {_bytes(mem['estimate_bytes'])}{by}")
        if _number(mem.get("capacity_bytes")):
            parts.append(f"of {_bytes(mem['capacity_bytes'])}" + (" each" if len(devices) > 1 else ""))
        return _bytes(mem["peak_bytes"]), "; ".join(parts)

    def flag_notes(self) -> list[tuple[str, str]]:
        """(flag, what it means) for each flag the run raised."""
        figures = {stats.FLAG_CONTENDED: self.load_text(), stats.FLAG_UNSTABLE: self.repeats_text(),
                   stats.FLAG_STORE_OUTAGE: (self.store_outage or {}).get("text")}
        return [(f, FLAG_TEXT.get(f, f) + (f" ({figures[f]})" if figures.get(f) else "")) for f in self.flags]

    def describe(self) -> str:
        """Several lines for a terminal: the headline, each figure, each flag explained, the run id."""
        lines = [self.headline()]
        lines += [f"  {label}: {value}" + (f" — {detail}" if detail else "") for label, value, detail in self._details()]
        notes = [_flag_line(name, text) for name, text in self.flag_notes()] or ["none"]
        lines.append("  flags: " + notes[0])
        lines += [" " * len("  flags: ") + note for note in notes[1:]]
        if self.run_id:
            lines.append(f"  run id {self.run_id} ({short_id(self.run_id)} in the dashboard; any command takes either)")
        return "\n".join(lines)

    def _tflops_detail(self) -> str:
        parts = []
        if _number(self.mfu) and _number(self.peak_tflops) and self.peak_source == peaks.PROVISIONAL:
            parts.append(f"MFU {self.mfu:.1%} of {self.peak_tflops:.4g} TFLOP/s peak "
                         f"({peaks.PROVISIONAL}: {peaks.PROVISIONAL_NOTE})")
        elif _number(self.mfu) and _number(self.peak_tflops):
            parts.append(f"MFU {self.mfu:.1%} of {self.peak_tflops:.4g} TFLOP/s peak ({self.peak_source or 'datasheet'})")
        elif _number(self.peak_tflops):
            parts.append(f"of {self.peak_tflops:.4g} TFLOP/s peak ({self.peak_source or 'datasheet'})")
        else:
            parts.append("no peak known for this accelerator, so no MFU")
        if _number(self.flops_per_example):
            parts.append(f"{_si(self.flops_per_example)}FLOP per {'token' if self.unit == 'tokens' else 'example'}"
                         + stats.flops_source_text(self.flops_source, self.flops_per_example,
                                                   self.compiler_flops_per_example))
        return "; ".join(parts)


_OMITTED_WHEN_NONE = ("run_id", "backend", "backend_version", "repeats", "repeat_cv", "host_load", "memory",
                      "accuracy", "store_outage", "model_info", "flops_source", "analytic_flops_per_example",
                      "compiler_flops_per_example")


def _json_fields():
    return [f for f in fields(RunResult) if f.name != "extra"]


_DEFAULTED = {"unit", "device_names", "examples_per_sec_ci95", "flags", "losses", "placement", "shapes", "env",
              "spec", "xla", "status"}


# -- RunResult.check's rules, one per stored key ---------------------------------------------------

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
    "model": _text_or_null, "unit": _text, "device": _text_or_null, "backend": _text_or_null,
    "backend_version": _text_or_null, "accelerator": _text_or_null, "repeats": _amounts_or_null,
    "repeat_cv": _amount_or_null, "host_load": _object_or_null,
    "accelerator_count": _count_or_null, "device_names": _texts, "replicas": _count_or_null,
    "global_batch_size": _count_or_null, "per_replica_batch_size": _count_or_null, "precision": _text_or_null,
    "xla": _bool, "data": _text_or_null, "status": _text, "examples_per_sec": _amount_or_null,
    "examples_per_sec_ci95": _ci95, "step_time_median_s": _amount_or_null, "step_time_p10_s": _amount_or_null,
    "step_time_p90_s": _amount_or_null, "step_time_std_s": _amount_or_null, "samples": _count_or_null,
    "steps": _count_or_null, "steps_per_loop": _count_or_null, "compile_s": _amount_or_null,
    "flops_per_example": _amount_or_null, "forward_flops_per_example": _amount_or_null,
    "flops_source": _text_or_null, "analytic_flops_per_example": _amount_or_null,
    "compiler_flops_per_example": _amount_or_null,
    "achieved_tflops": _amount_or_null, "peak_tflops": _amount_or_null, "peak_source": _text_or_null,
    "mfu": _amount_or_null, "flags": _flags, "losses": _losses, "placement": _placement, "shapes": _object,
    "env": _object, "spec": _object, "run_id": _text_or_null, "memory": lambda n, v, f: _memory(n, v, f),
    "accuracy": accuracy_shape.check, "store_outage": _object_or_null,
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
            _fail(f"{name}.{key}" if isinstance(key, str) and key.isidentifier() else name,
                  f"one of the keys {', '.join(MEMORY_KEYS)}", key)
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


def _copied(value):
    """A deep copy of plain JSON data, so a RunResult never shares a list with its caller."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copied(v) for v in value]
    return value


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _bytes(value: float) -> str:
    return f"{value / 1e9:,.2f} GB" if value >= 1e8 else f"{value / 1e6:,.1f} MB"


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms" if ms >= 10 else f"{ms:.2f} ms"


def _si(value: float) -> str:
    """76800 → '76.8 k' (a prefix for FLOP counts, with its space)."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}"
    return f"{value:.3g} "


def _flag_line(name: str, text: str) -> str:
    """A flag's note, naming the flag's id (what `list --json` carries) only where its words do not
    already start the note: "contended: other processes…", never "contended — contended: …"."""
    return text if text.startswith(name.replace("_", " ")) else f"{text} ({name})"
