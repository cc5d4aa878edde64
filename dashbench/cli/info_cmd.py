"""`python -m dashbench models` (no TensorFlow) and `python -m dashbench devices` (what TensorFlow, or
with --backend jax JAX, sees)."""

from __future__ import annotations

import argparse
import sys

from dashbench.cli import strict_json, terminal
from dashbench.cli.cluster_args import add_cluster_arguments
from dashbench.cli.db_args import db_path_arg


def register(subparsers) -> None:
    # Every command takes --db (scripts pass it uniformly); these two read no database.
    models = subparsers.add_parser("models", help="list the workloads with their units and defaults")
    models.add_argument("--json", action="store_true", help="print a JSON list")
    models.add_argument("--db", type=db_path_arg, default=None, help=argparse.SUPPRESS)
    models.set_defaults(func=handle_models)
    devices = subparsers.add_parser("devices", help="show the CPUs, GPUs and TPUs TensorFlow (or JAX) sees here")
    devices.add_argument("--json", action="store_true", help="print a JSON object")
    devices.add_argument("--backend", default="tensorflow", help="whose view: tensorflow (default) or jax")
    devices.add_argument("--db", type=db_path_arg, default=None, help=argparse.SUPPRESS)
    add_cluster_arguments(devices, on=False)
    devices.set_defaults(func=handle_devices)


def handle_models(args) -> int:
    from dashbench.workloads import registry
    from dashbench.workloads.catalog import describe_all

    rows = describe_all()
    if args.json:
        print(strict_json.dumps(rows))
        return 0
    width = terminal.terminal_width()  # a terminal's lines wrapped to it; a pipe gets each whole
    for row in rows:
        shape = ", ".join(f"{k} {v}" for k, v in row["defaults"].items())
        batches = ", ".join(f"{k} {v}" for k, v in row["batch_sizes"].items())
        lines = [f"{row['name']:<18} {row['unit']:<9} {shape}; batch {batches}"]
        # The one quick recipe: presets' --quick and the Run page's Quick try use the same.
        lines.append(f"{'':<18} quick try: {registry.get(row['name']).quick_command()}")
        lines.append(f"{'':<18} {row['description']}")
        print(terminal.fit("\n".join(lines), width))
    return 0


def handle_devices(args) -> int:
    from dashbench.core.spec import BACKENDS

    if args.cluster is not None:
        return _cluster_devices(args)

    if args.backend not in BACKENDS:
        print(
            f"dashbench devices: error: backend: unknown backend {args.backend!r}; choose one of: {', '.join(BACKENDS)}",
            file=sys.stderr,
        )
        return 2
    from dashbench.engine import backends

    backends.select(args.backend)
    backend = backends.get(args.backend)
    info = backend.discover()
    if args.json:
        print(strict_json.dumps(info))
        return 0
    framework = f"{backend.display_name} {info[backend.name]}"
    print(f"{framework}; default device: {info['default_device']}")
    print(f"CPU: {info['cpu']['model']} ({info['cpu']['cores']} cores)")
    for gpu in info["gpus"]:
        print(f"GPU: {gpu['name']} {gpu.get('device_name', '')} → {gpu['accelerator']}")
    if not info["gpus"]:
        print(f"GPU: none seen by {framework.split()[0]}")
    tpu = info["tpu"]
    print(f"TPU: {tpu['evidence'] + ' ' + (tpu['accelerator_type'] or '') if tpu['evidence'] else 'none'}")
    identity = tpu.get("identity")
    if identity:
        print(
            f"     {identity['devices']} JAX devices = {identity['chips']} × {identity['name']}"
            + "".join(f"; {problem}" for problem in identity["mismatch"])
        )
    return 0


def _cluster_devices(args) -> int:
    """The cluster's hosts and what they hold, from Ray (no framework is loaded here)."""
    from dashbench.cli.cluster_args import address
    from dashbench.fleet import inventory

    hosts = inventory.hosts(address(args))
    if args.json:
        print(
            strict_json.dumps(
                {
                    "hosts": [inventory.as_dict(h) for h in hosts],
                    "kinds": [dict(k.__dict__, multi_host=k.multi_host) for k in inventory.kinds(hosts)],
                }
            )
        )
        return 0
    print("\n".join(inventory.describe(hosts)))
    return 0
