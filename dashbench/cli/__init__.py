"""The `python -m dashbench` command line. Each command lives in its own module with a `register`."""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

from dashbench import __version__
from dashbench.cli import strict_json
from dashbench.cli.terminal import shown
from dashbench.core.spec import SpecError

# Each module defines register(subparsers); a command sets `func` (args -> exit code).
COMMAND_MODULES = [
    "run_cmd",
    "info_cmd",
    "results_cmd",
    "sweep_cmd",
    "prices_cmd",
    "preset_cmd",
    "doctor_cmd",
    "store_cmd",
    "profile_cmd",
    "predict_cmd",
]


class UsageError(Exception):
    """A bad command line: reported as one line naming the field, exit code 2."""


def usage_field(message: str) -> str:
    """The field an argparse message is about: `argument --batch-size: ...` → batch_size."""
    match = re.search(r"(?:argument |required: )(--[\w-]+)", message)
    if match:
        return match.group(1).lstrip("-").replace("-", "_")
    match = re.match(r"(\w+): ", message)
    return match.group(1) if match else "arguments"


class _Parser(argparse.ArgumentParser):
    # argparse prints usage plus the error; scripts and the dashboard want one line.
    def error(self, message):
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m dashbench", description="Training-throughput benchmarks.")
    parser.add_argument("--version", action="version", version=f"dashbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"dashbench.cli.{name}").register(sub)
    return parser


# Commands whose --json promises exactly one JSON object on stdout, also for bad input.
JSON_ERROR_COMMANDS = ("run", "preset")


def _refuse_db_url(text: str | None) -> None:
    # DASHBENCH_DB as a URL of another scheme than PostgreSQL's is refused like --db as one (db_args.db_path_arg).
    from dashbench.store import url_refusal

    if url_refusal(text):
        raise SpecError("DASHBENCH_DB", url_refusal(text))


def _store_error() -> type:
    # Looked up only when something was raised: the store (and pandas) load with the commands that use it.
    from dashbench.store import StoreError

    return StoreError


def _database_errors() -> tuple:
    """The drivers' errors, of those loaded (a command that never opened a server never imports them)."""
    import sqlite3

    found = [sqlite3.Error]
    for module, name in (("psycopg", "Error"), ("sqlalchemy.exc", "SQLAlchemyError")):
        if module in sys.modules:
            found.append(getattr(sys.modules[module], name))
    return tuple(found)


def _driver_line(exc: BaseException) -> str:
    if type(exc).__module__.split(".")[0] in ("psycopg", "sqlalchemy"):
        from dashbench.store.postgres import server as postgres

        return str(postgres.refused(exc, None, "the team store", "use")).replace("database the team", "the team")
    return f"db: {' '.join(str(exc).split()) or type(exc).__name__}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser().parse_args(argv)
        if getattr(args, "db", "") is None:  # a command that reads a database, --db left out
            _refuse_db_url(os.environ.get("DASHBENCH_DB"))
        return int(args.func(args) or 0)
    except (UsageError, SpecError) as exc:
        print(f"error: {shown(exc)}", file=sys.stderr)
        if "--json" in argv and next((a for a in argv if not a.startswith("-")), None) in JSON_ERROR_COMMANDS:
            field = exc.field if isinstance(exc, SpecError) else usage_field(str(exc))
            print(strict_json.dumps({"status": "invalid", "field": field, "error": str(exc)}))
        return 2
    except _store_error() as exc:  # a store refusal no command said itself: one line, never a traceback
        from dashbench.store import db_line

        print(f"error: {shown(db_line(exc))}", file=sys.stderr)
        return 2
    except _database_errors() as exc:  # the driver's own, past every edge that says it as a StoreError
        print(f"error: {shown(_driver_line(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`... | head`): not an error worth a traceback. Point stdout at
        # /dev/null so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command killed by a closed pipe
