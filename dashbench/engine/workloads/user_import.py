"""Importing a user's builder file (`file.py:build`): once per file and hash in a process, in a
thread the run waits on for a limited time, so a file that hangs at import is named, never waited
for. Its failures are one-line SpecErrors on `model`, as every error about a user's model is."""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from pathlib import Path

from dashbench.core.errors import one_line
from dashbench.core.spec import SpecError

IMPORT_TIMEOUT_ENV = "DASHBENCH_MODEL_IMPORT_TIMEOUT_S"
IMPORT_TIMEOUT_S = 60.0

_modules: dict = {}


def say(field_text: str) -> SpecError:
    return SpecError("model", field_text)


def import_file(path: Path, sha: str):
    """The module of a builder file, imported once, in a thread the run waits on for at most
    DASHBENCH_MODEL_IMPORT_TIMEOUT_S: a file that hangs at import is named, never waited for."""
    key = (str(path), sha)
    if key in _modules:
        return _modules[key]
    limit = float(os.environ.get(IMPORT_TIMEOUT_ENV) or IMPORT_TIMEOUT_S)
    name = f"dashbench_user_model_{sha[:12]}"
    found: dict = {}

    def load():
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # what keras.saving's registered classes are looked up in
            spec.loader.exec_module(module)
            found["module"] = module
        except BaseException as exc:  # the user's code: any error is its message
            sys.modules.pop(name, None)
            found["error"] = exc

    thread = threading.Thread(target=load, name=f"import {path.name}", daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        raise say(f"{path.name} did not finish importing within {limit:g} s ({IMPORT_TIMEOUT_ENV}): stopped")
    if "error" in found:
        raise say(f"{path.name} failed at import: {one_line(found['error'], typed=True)}")
    _modules[key] = found["module"]
    return found["module"]
