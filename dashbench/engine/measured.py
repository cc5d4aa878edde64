"""What both backends' loops share: the compile / warm-up / measure sequence around a host call,
and the RunResult built from its samples (statistics, MFU, flags, environment record)."""

from __future__ import annotations

import contextlib
from typing import Callable, Optional

from dashbench.core import stats
from dashbench.core.spec import host_loops
from dashbench.engine import envinfo, hostload
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


def result(
    spec,
    workload,
    shapes,
    target,
    flops: dict,
    compile_s: float,
    samples: list[dict],
    placement: dict,
    peak: tuple[Optional[float], Optional[str], float],
    xla: bool,
    backend: tuple[str, str],
    env_extra: dict,
    host_load: Optional[dict] = None,
    model_info: Optional[dict] = None,
) -> RunResult:
    """The run's result. `peak`: (TFLOP/s of all accelerators used, its source, above-peak margin).
    With repeats, the throughput is the median of the repeats' and their CV is kept beside it."""
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
    peak_tflops, peak_source, margin = peak
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
        env=envinfo.record(target.device_names, spec.precision, xla, {"keras_backend": backend[0], **env_extra}),
        spec=spec.to_dict(),
        host_load=host_load,
    )


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
