"""Running a user's code (`file.py:build`: its import, its builder, anything else of it) in the run's
own process, so that it can neither hang, nor end, nor speak for the run:
- each piece runs under one time limit, DASHBENCH_MODEL_IMPORT_TIMEOUT_S: a SIGALRM in the main thread
  stops Python code past it; code stuck in C past it plus DASHBENCH_MODEL_BACKSTOP_S ends the process
  from a thread (its one line said first, STUCK_HOOKS run: the command's JSON, the run's children ended);
- `sys.exit` and `os._exit` (in this process, not in a child it forked) are refused, whatever the code.
Every failure is a one-line SpecError on `model`, as every error about a user's model is."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Callable

from dashbench.core.env import positive_seconds
from dashbench.core.errors import one_line
from dashbench.core.spec import SpecError

IMPORT_TIMEOUT_ENV = "DASHBENCH_MODEL_IMPORT_TIMEOUT_S"
IMPORT_TIMEOUT_S = 60.0
BACKSTOP_ENV = "DASHBENCH_MODEL_BACKSTOP_S"
BACKSTOP_S = 5.0  # past the limit, a main thread still not back (stuck in C code) ends the process
EXIT_CODE = 2  # the exit of a run whose user code had to be stopped from the backstop: bad input
# Called with the error line just before the backstop ends the process (a command's JSON, the children).
STUCK_HOOKS: list[Callable[[str], None]] = []

_modules: dict = {}
_REAL_EXIT = os._exit  # dashbench's own ends (the backstop, the run's guard) are never refused


def say(field_text: str) -> SpecError:
    return SpecError("model", field_text)


def timeout_s() -> float:
    """The time limit of each piece of a user's code: a 0 or negative one would switch the alarm off."""
    return positive_seconds(IMPORT_TIMEOUT_ENV, IMPORT_TIMEOUT_S)


def backstop_s() -> float:
    """The grace past the time limit before a main thread still not back is ended from outside: long
    enough for a SIGALRM to stop Python code, short enough that a stuck builder is not waited on."""
    return positive_seconds(BACKSTOP_ENV, BACKSTOP_S)


class Stopped(SpecError):
    """The user's code was stopped (past its time) or refused (it exited)."""


class _TimedOut(BaseException):
    """Raised in the main thread by SIGALRM; a BaseException, so a builder's `except Exception` keeps it."""


class _Exited(BaseException):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def user_code(what: str, doing: str):
    """The block runs the user's `what` (`m.py`, `m.py:build()`), which `doing` (`import`, `return`):
    stopped past the time limit, refused if it exits."""
    limit = timeout_s()
    late = f"{what} did not {doing} within {limit:g} s ({IMPORT_TIMEOUT_ENV}): stopped"
    own_pid, own_thread = os.getpid(), threading.get_ident()

    def refuse_exit(code=0):
        # A child the user's code forked ends as it asks, and so does dashbench's guard thread.
        if os.getpid() != own_pid or threading.get_ident() != own_thread:
            _REAL_EXIT(code)
        raise _Exited(code)

    alarm = threading.current_thread() is threading.main_thread() and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    previous = signal.signal(signal.SIGALRM, _on_alarm) if alarm else None
    backstop = threading.Timer(limit + backstop_s(), _end_stuck, args=(f"error: model: {late}",))
    backstop.daemon = True
    os._exit = refuse_exit
    backstop.start()
    if alarm:
        signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    except _TimedOut:
        raise Stopped("model", late) from None
    except (_Exited, SystemExit) as exc:
        how = "os._exit" if isinstance(exc, _Exited) else "sys.exit"
        raise say(
            f"{what} called {how}({exc.code!r}): a model file defines and returns a model, it never exits"
        ) from None
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        backstop.cancel()
        os._exit = _REAL_EXIT


def _on_alarm(signum, frame):
    raise _TimedOut()


def _end_stuck(line: str) -> None:
    from dashbench.engine import frameworks

    try:
        os.write(frameworks.user_stderr_fd(), (line + "\n").encode())
    except OSError:
        pass
    for hook in list(STUCK_HOOKS):
        try:
            hook(line)
        except Exception:
            pass
    _REAL_EXIT(EXIT_CODE)


def import_file(path: Path, sha: str):
    """The module of a builder file, imported once per file and hash, under the time limit."""
    key = (str(path), sha)
    if key in _modules:
        return _modules[key]
    name = f"dashbench_user_model_{sha[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # what keras.saving's registered classes are looked up in
    try:
        with user_code(path.name, "finish importing"):
            try:
                spec.loader.exec_module(module)
            except Exception as exc:  # the user's code: any error is its message
                raise say(f"{path.name} failed at import: {one_line(exc, typed=True)}") from None
    except BaseException:
        sys.modules.pop(name, None)
        raise
    _modules[key] = module
    return module
