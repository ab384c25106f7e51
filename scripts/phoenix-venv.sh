#!/usr/bin/env bash
# Installs Arize Phoenix into its own cached virtual environment, `.phoenix-venv/` at the repo
# root. Phoenix is large (hundreds of MB, minutes to install) and its dependency pins must not
# leak into the project's .venv, so it lives apart. Idempotent: a venv that already holds the
# pinned version is left as it is.
#
# Usage: scripts/phoenix-venv.sh            (prints the phoenix executable's path last)
# Env:   PHOENIX_VENV (default .phoenix-venv), PYTHON (default python3)
set -euo pipefail
cd "$(dirname "$0")/.."

PHOENIX_VERSION="20.26.1"
VENV="${PHOENIX_VENV:-.phoenix-venv}"
PYTHON="${PYTHON:-python3}"

installed_version() {
  "$VENV/bin/python" - <<'PY' 2>/dev/null || true
from importlib.metadata import version
print(version("arize-phoenix"))
PY
}

if [ -x "$VENV/bin/phoenix" ] && [ "$(installed_version)" = "$PHOENIX_VERSION" ]; then
  echo "arize-phoenix $PHOENIX_VERSION already installed in $VENV" >&2
else
  start=$(date +%s)
  echo "installing arize-phoenix $PHOENIX_VERSION into $VENV (large download, takes minutes)" >&2
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet "arize-phoenix==$PHOENIX_VERSION"
  echo "installed arize-phoenix $PHOENIX_VERSION in $(( $(date +%s) - start ))s" >&2
fi
cd "$VENV" && echo "$(pwd)/bin/phoenix"
