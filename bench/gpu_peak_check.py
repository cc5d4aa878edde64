"""Holds the peak table against a real GPU: what a GPU really does must stay under its datasheet peak.

dashbench flags any figure above the datasheet peak as an invalid measurement, so the table must be a
true upper bound: a peak set too low would flag honest runs, one set too high would let the seed's kind
of impossible figure through. This measures, with PyTorch (present on GPU boxes that lack TensorFlow):
- large matrix products in float32 (TF32 off and on), float16 and bfloat16, best of several, timed
  with CUDA events after a synchronise;
- seed 000's conv2d micro-benchmark (128×256×256×3, 256 5×5 filters, stride 2, SAME) per iteration,
  next to the seed's published CPU and K80 figures;
and checks the GPU's name maps to the canonical accelerator that runs and prices use.

    python bench/gpu_peak_check.py [--json OUT.json] [--docs docs/PERFORMANCE.md]

with dashbench installed (`pip install -e .`: TensorFlow is not needed) next to PyTorch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from docs_block import write_block  # bench/, on sys.path when a script here runs

from dashbench.core import stats
from dashbench.costs.reference import conv2d_flops
from dashbench.engine.target import canonical_gpu
from dashbench.hardware import peaks  # no TensorFlow in either

MATMUL_CASES = (  # label, torch dtype name, TF32 allowed, dashbench precision
    ("float32, TF32 off", "float32", False, "float32"),
    ("float32, TF32 on", "float32", True, "float32"),
    ("float16", "float16", False, "mixed_float16"),
    ("bfloat16", "bfloat16", False, "mixed_bfloat16"),
)
CONV = dict(batch=128, height=256, width=256, channels=3, filters=256, kernel=5, stride=2)
SEED_CONV_S = {"CPU (Colab, seed 000)": 2.44, "K80 (Colab, seed 000)": 0.280}


def timed_ms(torch, fn, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def matmul_rows(torch, accelerator: str, n: int, repeats: int) -> list[dict]:
    rows = []
    for label, dtype_name, tf32, precision in MATMUL_CASES:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        dtype = getattr(torch, dtype_name)
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        times = timed_ms(torch, lambda a=a, b=b: a @ b, warmup=3, repeats=repeats)
        best = 2.0 * n**3 / (min(times) / 1e3) / 1e12
        peak = peaks.datasheet_peak_tflops(accelerator, precision, tf32=tf32)
        rows.append(
            {
                "case": f"matmul {n}³ {label}",
                "precision": precision,
                "tf32": tf32,
                "best_ms": min(times),
                "median_ms": sorted(times)[len(times) // 2],
                "tflops": best,
                "peak_tflops": peak,
                "fraction_of_peak": best / peak if peak else None,
                "above_peak": stats.above_peak(best, peak),
            }
        )
        del a, b
    return rows


def conv_rows(torch, accelerator: str, repeats: int) -> list[dict]:
    flops = conv2d_flops(**CONV)
    rows = []
    for tf32 in (False, True):
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True
        images = torch.randn(CONV["batch"], CONV["channels"], CONV["height"], CONV["width"], device="cuda")
        filters = torch.randn(CONV["filters"], CONV["channels"], CONV["kernel"], CONV["kernel"], device="cuda")
        # SAME padding for a 5×5 kernel at stride 2 on an even side: 2 on each side gives ceil(256/2).
        conv = lambda images=images, filters=filters: torch.nn.functional.conv2d(
            images, filters, stride=CONV["stride"], padding=2
        )  # noqa: E731
        assert conv().shape[-1] == -(-CONV["width"] // CONV["stride"])
        times = timed_ms(torch, conv, warmup=3, repeats=repeats)
        seconds = sorted(times)[len(times) // 2] / 1e3
        achieved = flops / seconds / 1e12
        peak = peaks.datasheet_peak_tflops(accelerator, "float32", tf32=tf32)
        rows.append(
            {
                "case": f"seed conv2d, float32, TF32 {'on' if tf32 else 'off'}",
                "precision": "float32",
                "tf32": tf32,
                "median_ms": seconds * 1e3,
                "best_ms": min(times),
                "tflops": achieved,
                "peak_tflops": peak,
                "fraction_of_peak": achieved / peak if peak else None,
                "above_peak": stats.above_peak(achieved, peak),
                "speedup_vs_seed": {k: v / seconds for k, v in SEED_CONV_S.items()},
            }
        )
    return rows


def markdown(report: dict) -> str:
    lines = [
        "## GPU peak check (`bench/gpu_peak_check.py`)",
        "",
        f"GPU: {report['gpu_name']} → accelerator `{report['accelerator']}`; PyTorch {report['torch']}, "
        f"CUDA {report['cuda']}; measured {report['date']}. The peak table must be a true upper bound, "
        "since dashbench flags any figure above it as invalid.",
        "",
        "| case | best ms | TFLOP/s (best) | datasheet peak | fraction of peak | above peak? |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in report["rows"]:
        peak = f"{r['peak_tflops']:g}" if r["peak_tflops"] else "—"
        frac = f"{r['fraction_of_peak']:.0%}" if r["fraction_of_peak"] is not None else "—"
        lines.append(
            f"| {r['case']} | {r['best_ms']:.3f} | {r['tflops']:.1f} | {peak} | {frac} | "
            f"{'YES: table wrong' if r['above_peak'] else 'no'} |"
        )
    for r in report["rows"]:
        if "speedup_vs_seed" in r:
            ups = ", ".join(f"{v:,.0f}× {k}" for k, v in r["speedup_vs_seed"].items())
            lines.append(f"\n{r['case']}: median {r['median_ms']:.2f} ms per iteration — {ups}.")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the raw report here")
    parser.add_argument("--docs", type=Path, help="write the markdown section into this file")
    parser.add_argument("--size", type=int, default=8192, help="matrix side")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()

    import datetime

    import torch

    if not torch.cuda.is_available():
        print("error: device: no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 2
    gpu_name = torch.cuda.get_device_name(0)
    accelerator = canonical_gpu(gpu_name)
    report = {
        "gpu_name": gpu_name,
        "accelerator": accelerator,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "date": datetime.date.today().isoformat(),
        "in_peak_table": accelerator in peaks.table(),
        "rows": matmul_rows(torch, accelerator, args.size, args.repeats) + conv_rows(torch, accelerator, args.repeats),
    }
    text = markdown(report)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    if args.docs:
        write_block(args.docs, "gpu", text)
    bad = [r["case"] for r in report["rows"] if r["above_peak"]]
    if not report["in_peak_table"] or bad:
        print(f"error: peak table: {accelerator!r} missing or exceeded by {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
