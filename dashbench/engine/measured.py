"""What both backends' loops share: the compile / warm-up / measure sequence around a host call,
and the RunResult built from its samples (statistics, MFU, flags, environment record)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from dashbench.core import stats
from dashbench.core.spec import host_loops
from dashbench.engine import calibration, envinfo, hostload
from dashbench.hardware import peaks
from dashbench.results.result import RunResult


def run_loops(
    host_loop: Callable[[], tuple[float, float]],
    spec,
    emit,
    quiet=contextlib.nullcontext,
    gpu_indices: tuple[int, ...] = (),
):
    """Call `host_loop` (one timed host call of steps_per_loop steps → (seconds, loss)) once to
    compile, then for the warm-up loops and `spec.repeats` times the measured loops, emitting each
    phase and sample. Returns (compile_s, samples, host_load): host_load is what the rest of the
    machine did during the measured loops (engine.hostload)."""
    emit({"event": "phase", "phase": "compile"})
    with quiet():
        compile_s, _ = host_loop()
    emit({"event": "compiled", "compile_s": compile_s})
    samples: list[dict] = []
    warmup_loops, measured_loops = host_loops(spec)  # at most MAX_SAMPLES in all, with the repeats
    repeats = getattr(spec, "repeats", 1)
    window = None
    for index in range(warmup_loops + measured_loops * repeats):
        warmup = index < warmup_loops
        if index == 0 and warmup_loops:
            emit({"event": "phase", "phase": "warmup"})
        if index == warmup_loops:
            emit({"event": "phase", "phase": "measure"})
            window = hostload.Window(gpu_indices)
        duration, loss = host_loop()
        sample = {
            "event": "sample",
            "index": index,
            "steps": spec.steps_per_loop,
            "duration_s": duration,
            "loss": stats.finite_or_none(loss),
            "warmup": warmup,
        }
        if not warmup and repeats > 1:
            sample["repeat"] = (index - warmup_loops) // measured_loops
        samples.append(sample)
        emit(sample)
    return compile_s, samples, window.close() if window else None


@dataclass(frozen=True)
class Setting:
    """What a backend knows of its run besides what it measured: filled once (each backend's loop.setting,
    for its measured loop and its Trainer alike), so that `result` builds every backend's RunResult."""

    spec: Any
    workload: Any  # its registry entry: the unit throughput counts
    shapes: Any
    target: Any  # engine.target.Target
    backend: tuple[str, str]  # (name, version)
    xla: bool
    tf32: bool
    cpu_probe: Callable[[str], float]  # the backend's CPU peak probe (`peak`)
    strategy: str  # how the batch is split over the devices, in words
    parameters: int
    env_extra: dict = field(default_factory=dict)  # the backend's own record (JAX: its mesh)

    def env(self) -> dict:
        """The environment record's backend part."""
        target = self.target
        return {
            "strategy": self.strategy,
            "replicas": target.replicas,
            "multi_worker": target.multi_worker,
            "tf32": self.tf32,
            "parameters": self.parameters,
            **self.env_extra,
            **target.env,
        }


def result(
    setting: Setting,
    flops: dict,
    compile_s: float,
    samples: list[dict],
    placement: dict,
    emit: Optional[Callable[[dict], None]] = None,
    host_load: Optional[dict] = None,
    model_info: Optional[dict] = None,
    sizes: Optional[dict] = None,
    bytes_accessed: Optional[float] = None,
) -> RunResult:
    """The run's result. The peak (TFLOP/s of all accelerators used, its source, above-peak margin) is
    found here: a CPU's by the backend's probe unless the host is calibrated (`emit` says the probe's
    phase, seconds at full size). With repeats, the throughput is the median of the repeats' and their
    CV is kept beside it."""
    spec, workload, shapes, target = setting.spec, setting.workload, setting.shapes, setting.target
    backend, xla = setting.backend, setting.xla
    if target.kind == "cpu" and not calibration.cpu_peaks() and emit:  # a calibrated host does not probe
        emit({"event": "phase", "phase": "probe"})
    found = calibration.applied(target, peak(target, spec.precision, setting.tf32, setting.cpu_probe))
    measured = [s for s in samples if not s["warmup"]]
    per_batch = spec.batch_size * stats.examples_per_item(workload.unit, shapes.seq_len)
    timing = stats.step_time_stats(measured, per_batch)
    repeats = repeat_cv = None
    if getattr(spec, "repeats", 1) > 1:
        repeats = [
            stats.step_time_stats([s for s in measured if s.get("repeat") == r], per_batch)["examples_per_sec"]
            for r in range(spec.repeats)
        ]
        timing["examples_per_sec"], repeat_cv = stats.repeat_spread(repeats)
    losses = [s["loss"] for s in samples]
    counted, source = stats.mfu_flops(flops)
    achieved = stats.achieved_tflops(counted, timing["examples_per_sec"])
    peak_tflops, peak_source, margin = found
    flags = []
    if stats.above_peak(achieved, peak_tflops, margin):
        flags.append(stats.FLAG_ABOVE_PEAK)
    if stats.non_finite(losses):
        flags.append(stats.FLAG_NON_FINITE_LOSS)
    if stats.loss_not_falling(losses):
        flags.append(stats.FLAG_LOSS_NOT_FALLING)
    if stats.placement_mismatch(target.kind, placement["variables"] + placement["ops"]):
        flags.append(stats.FLAG_PLACEMENT_MISMATCH)
    load = host_load or {}
    if stats.contended(load.get("other_cores"), load.get("cores")) or load.get("gpu_other_processes"):
        flags.append(stats.FLAG_CONTENDED)
    if repeat_cv is not None and repeat_cv > stats.UNSTABLE_CV:
        flags.append(stats.FLAG_UNSTABLE)
    if stats.flops_disagree(flops):
        flags.append(stats.FLAG_FLOPS_DISAGREE)
    if stats.skewed(timing["examples_per_sec"], stats.median_step_rate(per_batch, timing["step_time_median_s"])):
        flags.append(stats.FLAG_SKEWED)
    return RunResult(
        model=spec.model,
        unit=workload.unit,
        device=target.kind,
        backend=backend[0],
        backend_version=backend[1],
        accelerator=target.accelerator,
        accelerator_count=target.accelerator_count,
        device_names=list(target.device_names),
        replicas=target.replicas,
        global_batch_size=spec.batch_size,
        per_replica_batch_size=spec.batch_size // target.replicas,
        precision=spec.precision,
        xla=xla,
        data=spec.data,
        status="done",
        **timing,
        repeats=repeats,
        repeat_cv=repeat_cv,
        steps=spec.steps,
        steps_per_loop=spec.steps_per_loop,
        compile_s=compile_s,
        flops_per_example=counted,
        forward_flops_per_example=flops.get("forward") if source == "analytic" else None,
        flops_source=source,
        analytic_flops_per_example=flops.get("training"),
        compiler_flops_per_example=flops.get("compiler"),
        achieved_tflops=achieved,
        peak_tflops=peak_tflops,
        peak_source=peak_source,
        mfu=stats.mfu(achieved, peak_tflops),
        flags=flags,
        losses=losses,
        placement=placement,
        shapes=shapes.to_dict(),
        model_info=model_info,
        env=envinfo.record(target.device_names, spec.precision, xla, {"keras_backend": backend[0], **setting.env()}),
        spec=spec.to_dict(),
        host_load=host_load,
        profile=run_profile(
            spec, shapes.seq_len if workload.unit == "tokens" else None, flops, backend[0], sizes, bytes_accessed
        ),
    )


def run_profile(spec, tokens: Optional[int], flops: dict, backend: str, sizes, bytes_accessed) -> Optional[dict]:
    """The run's step profile (StepProfile's dict) from what it counted anyway: the compiler's FLOPs
    (XLA's on JAX, TF's graph profiler's on TensorFlow) or else the formula's, the step's bytes
    accessed (XLA's, JAX only) and its variables' sizes; None without the sizes."""
    if not sizes:
        return None
    from dashbench.workloads.profile import PRECISION, StepProfile

    compiler = flops.get("compiler")
    per_example = compiler or flops.get("training")
    if not per_example:
        return None
    per_batch = spec.batch_size * (tokens or 1)
    source = ("xla" if backend == "jax" else "tf_profiler") if compiler else "formula"
    return StepProfile(
        model=spec.model,
        batch_size=spec.batch_size,
        precision=PRECISION[spec.precision],
        flops=float(per_example * per_batch),
        flops_source=source,
        bytes_accessed=bytes_accessed,
        bytes_source="xla" if bytes_accessed else None,
        tokens_per_example=tokens,
        unit="tokens" if tokens else "examples",
        note=f"counted in the run's process ({backend}); FLOPs: {source}",
        **sizes,
    ).to_dict()


def peak(target, precision: str, tf32: bool, cpu_probe: Callable[[str], float]):
    """(peak TFLOP/s for all accelerators used, 'datasheet'|'measured'|None, above-peak margin).
    A CPU's peak is measured (`cpu_probe(dtype)`: the one numpy probe every backend shares, or the
    host's calibration); the others' come from the datasheet table."""
    if target.kind == "cpu":
        per_host = cpu_probe("float32")
        dtype = peaks.compute_dtype(precision)
        if dtype != "float32":
            per_host = max(per_host, cpu_probe(dtype))
        return per_host * target.accelerator_count, "measured", peaks.CPU_SOFT_MARGIN
    per_chip = peaks.datasheet_peak_tflops(target.accelerator, precision, tf32)
    if per_chip is None:
        return None, None, 1.0
    return per_chip * target.accelerator_count, "datasheet", 1.0


def variable_sizes(model, optimizer) -> dict:
    """A step profile's sizes from the variables' shapes (no values read: abstract ones do too)."""
    trainable = _bytes(model.trainable_variables)
    return {
        "params": int(sum(_count(v.shape) for v in model.trainable_variables)),
        "param_bytes": trainable + _bytes(model.non_trainable_variables),
        "optimizer_bytes": _bytes(optimizer.variables),
        # Gradients are taken against the stored (float32) weights, whatever the compute precision.
        "grad_bytes": trainable,
    }


def _count(shape) -> int:
    count = 1
    for size in shape:
        count *= int(size)
    return count


def _bytes(variables) -> float:
    import numpy as np

    return float(sum(_count(v.shape) * np.dtype(getattr(v.dtype, "name", v.dtype)).itemsize for v in variables))
