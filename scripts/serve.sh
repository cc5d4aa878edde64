#!/usr/bin/env bash
# Installs dashbench into .venv and starts the dashboard (extra arguments go to streamlit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh requirements.txt
exec .venv/bin/streamlit run app.py "$@"
