"""The bench scripts as modules, for the tests that check them (bench/ is no package: its scripts run
from their own folder and import each other, e.g. docs_block, by name)."""

import importlib
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)
