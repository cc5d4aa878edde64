#!/usr/bin/env bash
# Installs dashbench with its test tools into .venv and runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh requirements-dev.txt
# Python's own bytecode cache (__pycache__, gitignored), even where the environment turns it off: the suite
# starts hundreds of Python processes that import dashbench, and each worker collects every test module, so
# compiling them once instead of in every process spares CPU (measured in docs/testing.md).
unset PYTHONDONTWRITEBYTECODE
# --dist loadgroup: the Ray tests are one group, "ray", kept on one worker with one cluster (a second
# cluster's start and its idle nodes cost more than the chain's length once its runs were made small).
# Two workers for two cores: a third filled the CPU's idle waits but was no faster from a clean clone, and
# the contention it adds broke a timing check (docs/testing.md).
exec .venv/bin/python -m pytest -n 2 --dist loadgroup --durations=20 "$@"
