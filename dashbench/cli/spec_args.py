"""Command-line options shared by every command that builds a RunSpec (run, sweep, preset)."""

from __future__ import annotations

import argparse

from dashbench.spec import DATA_SOURCES, DEVICES, MODELS, PRECISIONS, SPEC_DEFAULTS, RunSpec

SHAPE_OPTIONS = ("image_size", "seq_len", "width")


def add_spec_arguments(parser: argparse.ArgumentParser, *, batch_size: bool = True, model: bool = True) -> None:
    """Values are checked by RunSpec, not argparse, so every error reads the same."""
    if model:
        parser.add_argument("--model", required=True, help=f"one of: {', '.join(MODELS)}")
    if batch_size:
        parser.add_argument("--batch-size", type=_int("batch_size"), required=True, help="global batch size")
    parser.add_argument("--device", default=SPEC_DEFAULTS["device"], help=f"one of: {', '.join(DEVICES)}")
    parser.add_argument("--precision", default=SPEC_DEFAULTS["precision"], help=f"one of: {', '.join(PRECISIONS)}")
    parser.add_argument("--xla", action="store_true", default=False, help="compile the step with XLA")
    parser.add_argument("--steps", type=_int("steps"), default=None, help="measured steps")
    parser.add_argument("--warmup", type=_int("warmup"), default=None, help="warm-up steps (not measured)")
    parser.add_argument("--steps-per-loop", type=_int("steps_per_loop"), default=None, help="steps per host call")
    parser.add_argument("--replicas", type=_int("replicas"), default=None, help="CPU logical devices / GPUs used")
    parser.add_argument("--data", default=SPEC_DEFAULTS["data"], help=f"one of: {', '.join(DATA_SOURCES)}")
    parser.add_argument("--data-path", default=None, help="folder with Fashion-MNIST IDX files (real data)")
    parser.add_argument("--image-size", type=_int("image_size"), default=None, help="override the image side")
    parser.add_argument("--seq-len", type=_int("seq_len"), default=None, help="override the sequence length")
    parser.add_argument("--width", type=_int("width"), default=None, help="override filters / hidden units")
    parser.add_argument("--tpu", default=None, help="TPU name or address (default: this TPU VM)")
    parser.add_argument("--label", default=None, help="free text stored with the run")
    parser.add_argument("--seed", type=_int("seed"), default=None)


def spec_from_args(args: argparse.Namespace, **overrides) -> RunSpec:
    values = {}
    for name in SPEC_DEFAULTS:
        value = getattr(args, name, None)
        if value is not None:
            values[name] = value
    for name in ("model", "batch_size"):
        if getattr(args, name, None) is not None:
            values[name] = getattr(args, name)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return RunSpec.from_dict(values)


def _int(field_name: str):
    def parse(text: str) -> int:
        try:
            return int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{field_name}: must be an integer, got {text!r}") from None

    parse.__name__ = field_name
    return parse
