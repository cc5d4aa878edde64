"""`--cluster [ADDRESS]` and `--on PLACE`: where a launching command runs (the fleet).

`--cluster` alone takes $RAY_ADDRESS. Only the option sends a run to a cluster: a run process that a
Ray job started on a node has RAY_ADDRESS set too, and must run there, not launch again.
"""

from __future__ import annotations


def add_cluster_arguments(parser, on: bool = True) -> None:
    parser.add_argument(
        "--cluster",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run on a Ray cluster: ray://HEAD:10001, http://HEAD:8265 or HEAD:6379 "
        "(alone: $RAY_ADDRESS); the run lands in --db, which must be a PostgreSQL team store",
    )
    if on:
        parser.add_argument(
            "--on",
            default=None,
            metavar="PLACE",
            help="with --cluster: where on it (a key from `dashbench devices --cluster`, a host "
            "or a slice name); default: a place with the spec's device",
        )


def address(args):
    """The parsed cluster address, or None when --cluster was not given."""
    if getattr(args, "cluster", None) is None:
        return None
    from dashbench.fleet.address import parse

    return parse(args.cluster)
