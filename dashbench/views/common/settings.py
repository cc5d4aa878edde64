"""Dashboard settings: read-only mode and the database path.

Read on every script run, never cached at import: tests (and a restarted server) change the
environment between runs, and a stale read-only flag would open a writable database.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

READ_ONLY_ENV = "DASHBENCH_READ_ONLY"
DB_ENV = "DASHBENCH_DB"
MODELS_DIR_ENV = "DASHBENCH_MODELS_DIR"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


@dataclass(frozen=True)
class Settings:
    read_only: bool
    db_path: str
    # The models folder the Run page offers users' model files from (--models-dir, DASHBENCH_MODELS_DIR).
    models_dir: str | None = None


def read_only_from_env(value: str | None) -> bool:
    text = (value or "").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{READ_ONLY_ENV}: {value!r} is not a yes/no value; use 1 or 0")


def load(argv: list[str] | None = None, environ: dict | None = None) -> Settings:
    """`streamlit run app.py -- --read-only --db PATH` passes the arguments after `--` as sys.argv[1:]."""
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    read_only = read_only_from_env(environ.get(READ_ONLY_ENV)) or "--read-only" in argv
    db_path = _option(argv, "--db") or environ.get(DB_ENV) or _default_db_path()
    models = _option(argv, "--models-dir") or environ.get(MODELS_DIR_ENV) or None
    from dashbench.store import ServerURL, is_server_url, url_scheme

    if is_server_url(db_path):  # a server: shown masked everywhere, its .url opens it (never a Path's "/")
        return Settings(read_only=read_only, db_path=ServerURL(db_path), models_dir=models)
    if url_scheme(db_path):  # another scheme, kept less anything after it: Store and open_store refuse it
        return Settings(read_only=read_only, db_path=url_scheme(db_path) + "…", models_dir=models)
    return Settings(read_only=read_only, db_path=str(Path(db_path).expanduser()), models_dir=models)


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _default_db_path() -> str:
    from dashbench.store import default_db_path

    return str(default_db_path())
