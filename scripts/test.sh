#!/usr/bin/env bash
# Installs dashbench with its test tools into .venv and runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -r requirements-dev.txt
exec .venv/bin/python -m pytest -n 2 "$@"
