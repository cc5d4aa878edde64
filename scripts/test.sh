#!/usr/bin/env bash
# Installs dashbench with its test tools into .venv and runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh requirements-dev.txt
# --dist loadgroup: the Ray tests come in two groups, "ray" (single-host runs) and "ray_multihost" (runs
# over several hosts, the lost slice host last), each kept on one worker with its own cluster: one
# group alone made a chain of ~8 min that the rest of the suite waited on.
exec .venv/bin/python -m pytest -n 2 --dist loadgroup --durations=20 "$@"
