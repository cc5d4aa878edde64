#!/usr/bin/env bash
# Installs dashbench with its test tools into .venv and runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh requirements-dev.txt
# --dist loadgroup: the Ray tests are one group, "ray", kept on one worker with one cluster (a second
# cluster's start and its idle nodes cost more than the chain's length once its runs were made small).
exec .venv/bin/python -m pytest -n 2 --dist loadgroup --durations=20 "$@"
