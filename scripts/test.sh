#!/usr/bin/env bash
# Installs dashbench with its test tools into .venv and runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh requirements-dev.txt
# --dist loadgroup: the Ray tests (xdist_group "ray") share one worker, so the suite starts one cluster.
exec .venv/bin/python -m pytest -n 2 --dist loadgroup "$@"
