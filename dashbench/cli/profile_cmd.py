"""`python -m dashbench profile`: one training step's cost (FLOPs, bytes accessed, parameter,
optimizer and gradient bytes) counted by XLA on this host's CPU, with no device and no weights."""

from __future__ import annotations

import argparse

from dashbench.cli import strict_json
from dashbench.cli.db_args import db_path_arg
from dashbench.cli.spec_args import add_spec_arguments, spec_from_args

# The options a profile reads; the rest of run's (steps, device, data, …) change no step's cost.
SHAPE_FIELDS = ("model", "batch_size", "precision", "image_size", "seq_len", "width", "layers", "seed")


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "profile", help="one training step's FLOPs, bytes and parameter sizes, counted by XLA with no device"
    )
    add_spec_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the profile as one JSON object")
    parser.add_argument("--db", type=db_path_arg, default=None, help=argparse.SUPPRESS)
    parser.set_defaults(func=handle)


def handle(args) -> int:
    from dashbench.core.spec import SpecError

    for name in vars(args):
        if name not in (*SHAPE_FIELDS, "json", "db", "func", "command") and getattr(args, name) is not None:
            raise SpecError(name, f"changes no step's cost; profile takes {', '.join(SHAPE_FIELDS)}")
    spec = spec_from_args(args, backend="jax", device="cpu")
    from dashbench.engine.profile import step_profile

    profile = step_profile(spec)
    if args.json:
        print(strict_json.dumps(profile.to_dict()))
        return 0
    for line in lines(profile):
        print(line)
    return 0


def lines(profile) -> list[str]:
    """The profile in a few lines of words (also `show`'s)."""
    per = "token" if profile.unit == "tokens" else "example"
    accessed = f"{_si(profile.bytes_accessed)}B ({profile.bytes_source})" if profile.bytes_accessed else "—"
    return [
        f"{profile.model}, batch {profile.batch_size}, {profile.precision}: {_si(profile.flops)}FLOP a step "
        f"({profile.flops_source}), {_si(profile.flops_per_unit)}FLOP per {per}; bytes accessed {accessed}",
        f"parameters {profile.params:,} ({_si(profile.param_bytes)}B), optimizer {_si(profile.optimizer_bytes)}B, "
        f"gradients exchanged {_si(profile.grad_bytes)}B a step",
        *([profile.note] if profile.note else []),
    ]


def _si(value: float) -> str:
    """3 significant figures and a decimal prefix: 1.23 T, 456 M."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}"
    return f"{value:.3g} "
