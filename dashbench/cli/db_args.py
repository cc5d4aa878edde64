"""Every command's `--db` and `--read-only`: the option itself, read-only mode, and a store's error as
the one line (exit 2) each command prints."""

from __future__ import annotations

import argparse
import functools
import sys

from dashbench import store as _store
from dashbench.cli.terminal import shown
from dashbench.store import READ_ONLY_ENV, ServerURL, StoreError, db_line, default_db_path, is_server_url, url_refusal


def db_path_arg(text: str) -> str:
    """--db's type: a path, or a postgresql+psycopg:// URL (a ServerURL: every message shows it masked);
    an empty one is an error for every command (never "the default" for one command and "the current
    folder" for another). Leave --db out for the default."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"give a path (an empty --db is refused; leave --db out for $DASHBENCH_DB or {default_db_path()})"
        )
    if url_refusal(text):
        raise argparse.ArgumentTypeError(url_refusal(text))
    return ServerURL(text) if is_server_url(text) else text


def add_db_argument(parser: argparse.ArgumentParser, read_only_option: bool = False) -> None:
    parser.add_argument(
        "--db", default=None, type=db_path_arg, help=f"results database (default: $DASHBENCH_DB or {default_db_path()})"
    )
    if read_only_option:
        parser.add_argument(
            "--read-only",
            action="store_true",
            help=f"open the database read-only and never write to it (also: {READ_ONLY_ENV}=1)",
        )


def read_only_requested(args) -> bool:
    """--read-only, or DASHBENCH_READ_ONLY=1 (as the dashboard reads it)."""
    return _store.read_only_requested(bool(getattr(args, "read_only", False)))


def refuse_if_read_only(args, what: str) -> None:
    """A writing command in read-only mode: one line, nothing opened for writing."""
    _store.refuse_if_read_only(what, bool(getattr(args, "read_only", False)))


def one_field(message: str) -> str:
    """A StoreError's text for SpecError("db", …): without a leading "db: " of its own."""
    return message[4:] if message.startswith("db: ") else message


def reports_store_errors(handler):
    """A StoreError (unknown run, bad bundle, unreadable file) is one line on stderr, exit 2."""

    @functools.wraps(handler)
    def wrapped(args) -> int:
        try:
            return handler(args)
        except StoreError as exc:
            print(f"error: {shown(db_line(exc))}", file=sys.stderr)
            return 2
        except ValueError as exc:  # a bad filter value, e.g. --since yesterday
            print(f"error: {shown(exc)}", file=sys.stderr)
            return 2

    return wrapped
