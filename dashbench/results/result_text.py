"""A RunResult in words, once for the CLI and the dashboard: its headline, its figures, its flags
explained, and what a run is doing (its phase). RunResult (results/result.py) takes these methods
from ResultText; the data and its JSON stay there, the field checks in results/result_checks.py."""

from __future__ import annotations

import contextlib
from typing import Optional

from dashbench.core import stats
from dashbench.hardware import peaks
from dashbench.results.result_checks import _number
from dashbench.workloads import model_file
from dashbench.workloads.profile import StepProfile

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
    stats.FLAG_SKEWED: "skewed: the throughput from total time and from the median step differ by more than 20%",
    stats.FLAG_FLOPS_DISAGREE: "FLOP counts disagree: the compiler's is over 25% off the layer formula's; "
    "MFU uses the formula's",
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
    stats.FLAG_SKEWED: "skewed",
    stats.FLAG_FLOPS_DISAGREE: "FLOPs disagree",
}
# A run's verdict on contention where its measured window was too short to take the machine's load.
TOO_SHORT_TO_JUDGE = "too short to judge contention"

# Which loop a run's throughput times, and how Keras's own model.fit compared with it on the same
# model and data (bench/engine_overhead.py; the measurement, its load and date: docs/PERFORMANCE.md,
# whose model.fit row this figure must match). It is the CPU-time ratio: on a shared machine the
# wall-time one swings either side of 1 from one bench run to the next, the CPU one does not.
TIMED_LOOP = "dashbench's compiled train step (steps_per_loop steps per host call), not model.fit"
FIT_RATIO = {"tensorflow": 0.96}
FIT_CLOCK = "per second of process CPU time; by wall time the bench could not tell them apart on a shared CPU"

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


class ResultText:
    """RunResult's words: every method reads only the result's own fields."""

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
        median = self.median_rate()
        also = f"; {median:,.1f} from the median step" if median is not None else ""
        return f"{what}: {self.throughput_text()} from total time{also}"

    def median_rate(self) -> Optional[float]:
        """Throughput from the median step time (stats.median_step_rate), or None."""
        if not _number(self.global_batch_size) or not _number(self.step_time_median_s):
            return None
        seq_len = (self.shapes or {}).get("seq_len") if isinstance(self.shapes, dict) else None
        per_item = stats.examples_per_item(self.unit, seq_len) if self.unit != "tokens" or seq_len else 1
        return stats.median_step_rate(self.global_batch_size * per_item, self.step_time_median_s)

    def skew_text(self) -> str:
        """'the median step gives 722.0/s, 61% above the headline; likely: contention (…)', or ''."""
        found = stats.skew(self.examples_per_sec if _number(self.examples_per_sec) else None, self.median_rate())
        if found is None:
            return ""
        side = "above" if found > 0 else "below"
        text = f"the median step gives {self.median_rate():,.1f}/s, {abs(found):.0%} {side} the headline"
        return text + (f"; likely cause: {self.skew_cause()}" if abs(found) > stats.SKEW_SHARE else "")

    def skew_cause(self) -> str:
        """The likeliest reason a run's total time and its median step disagree."""
        load = self.load_text()
        if stats.FLAG_CONTENDED in self.flags or stats.FLAG_DEVICE_SHARED in self.flags:
            return f"contention ({load})" if load else "contention"
        if self.data and self.data != "synthetic":
            return "input: the data pipeline stalled some steps"
        return "a slow tail of steps (the first measured steps still warming up, or stalls): raise --warmup"

    def _flops_pair_text(self) -> str:
        formula, compiler = self.analytic_flops_per_example, self.compiler_flops_per_example
        if not _number(formula) or not _number(compiler) or not formula:
            return ""
        return f"formula {_si(formula)}FLOP, compiler {_si(compiler)}FLOP per example: {compiler / formula:.2f}×"

    def contention_verdict(self) -> Optional[str]:
        """TOO_SHORT_TO_JUDGE (with the window) where the measured window was too short to take the
        machine's load, so that no flag does not read as a clean machine; else None."""
        load = self.host_load if isinstance(self.host_load, dict) else {}
        if isinstance(load.get("note"), str) and stats.FLAG_CONTENDED not in self.flags:
            return f"{TOO_SHORT_TO_JUDGE}: {load['note']}; measure more steps"
        return None

    def timed_loop_text(self) -> tuple[str, str]:
        """(what was timed, how model.fit compared with it in the bench)."""
        ratio = FIT_RATIO.get(self.backend_name())
        if ratio is None:
            return TIMED_LOOP, "model.fit not measured against it on this backend"
        return (
            TIMED_LOOP,
            f"model.fit ran at {ratio:.2f}× its throughput {FIT_CLOCK} (bench/engine_overhead.py, docs/PERFORMANCE.md)",
        )

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
            throughput.append(
                (
                    f"{self.unit}/s",
                    f"{self.examples_per_sec:,.1f}",
                    "; ".join(
                        part
                        for part in ("the headline: all examples over the total measured time", detail, spread)
                        if part
                    ),
                )
            )
        median = self.median_rate()
        if median is not None:
            throughput.append(
                (
                    f"{self.unit}/s, median step",
                    f"{median:,.1f}",
                    "the batch over the median step time; " + self.skew_text(),
                )
            )
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
        if not self.accuracy:
            out.append(("timed loop", *self.timed_loop_text()))
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
        if isinstance(getattr(self, "profile", None), dict):
            with contextlib.suppress(TypeError, ValueError, ZeroDivisionError):
                out.append(("step profile", *StepProfile.from_dict(self.profile).summary()))
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
        what = (
            "process peak (resident)"
            if mem.get("kind") == "host"
            else f"device peak, {len(devices)} device(s) summed"
            if len(devices) > 1
            else "device peak"
        )
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
        figures = {
            stats.FLAG_CONTENDED: self.load_text(),
            stats.FLAG_UNSTABLE: self.repeats_text(),
            stats.FLAG_STORE_OUTAGE: (self.store_outage or {}).get("text"),
            stats.FLAG_SKEWED: self.skew_text(),
            stats.FLAG_FLOPS_DISAGREE: self._flops_pair_text(),
        }
        notes = [(f, FLAG_TEXT.get(f, f) + (f" ({figures[f]})" if figures.get(f) else "")) for f in self.flags]
        short = self.contention_verdict()
        return notes + ([("too_short", short)] if short else [])

    def describe(self) -> str:
        """Several lines for a terminal: the headline, each figure, each flag explained, the run id."""
        lines = [self.headline()]
        lines += [
            f"  {label}: {value}" + (f" — {detail}" if detail else "") for label, value, detail in self._details()
        ]
        notes = [_flag_line(name, text) for name, text in self.flag_notes()] or ["none"]
        lines.append("  flags: " + notes[0])
        lines += [" " * len("  flags: ") + note for note in notes[1:]]
        if self.run_id:
            lines.append(f"  run id {self.run_id} ({short_id(self.run_id)} in the dashboard; any command takes either)")
        return "\n".join(lines)

    def _tflops_detail(self) -> str:
        parts = []
        when = f", measured {_date(self.peak_as_of)}" if _number(self.peak_as_of) else ""
        if _number(self.mfu) and _number(self.peak_tflops) and self.peak_source == peaks.PROVISIONAL:
            parts.append(
                f"MFU {self.mfu:.1%} of {self.peak_tflops:.4g} TFLOP/s peak "
                f"({peaks.PROVISIONAL}{when}: {peaks.PROVISIONAL_NOTE})"
            )
        elif _number(self.mfu) and _number(self.peak_tflops):
            parts.append(
                f"MFU {self.mfu:.1%} of {self.peak_tflops:.4g} TFLOP/s peak ({self.peak_source or 'datasheet'}{when})"
            )
        elif _number(self.peak_tflops):
            parts.append(f"of {self.peak_tflops:.4g} TFLOP/s peak ({self.peak_source or 'datasheet'})")
        else:
            parts.append("no peak known for this accelerator, so no MFU")
        if _number(self.flops_per_example):
            parts.append(
                f"{_si(self.flops_per_example)}FLOP per {'token' if self.unit == 'tokens' else 'example'}"
                + stats.flops_source_text(self.flops_source, self.flops_per_example, self.compiler_flops_per_example)
            )
        return "; ".join(parts)


def _date(epoch: float) -> str:
    import datetime as _dt

    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


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
