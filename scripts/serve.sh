#!/usr/bin/env bash
# Installs dashbench into .venv and starts the dashboard (extra arguments go to streamlit).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -r requirements.txt
exec .venv/bin/streamlit run app.py "$@"
