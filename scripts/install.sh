#!/usr/bin/env bash
# Installs a requirement file and dashbench itself (editable) into .venv: `bash scripts/install.sh FILE`.
# Skips pip when nothing it reads changed since the last install from FILE, so starting the dashboard
# again is quick; the editable install means code changes need no reinstall.
set -euo pipefail
cd "$(dirname "$0")/.."
requirements="${1:?usage: scripts/install.sh REQUIREMENTS_FILE}"
stamp=".venv/.installed-$(basename "$requirements" .txt)"

[ -x .venv/bin/python ] || python3 -m venv .venv
# requirements*.txt: the file may include the others with -r.
if [ ! -f "$stamp" ] || [ -n "$(find requirements*.txt pyproject.toml -newer "$stamp")" ]; then
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r "$requirements"
  .venv/bin/pip install -q -e .
  touch "$stamp"
fi
