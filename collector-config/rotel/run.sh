#!/usr/bin/env bash
# Run the rotel collector: OTLP in on 4317/4318, traces out to one backend.
#
#   collector-config/rotel/run.sh phoenix|jaeger|tempo [extra rotel-agent start flags]
#
# Settings come from receive.env and <backend>.env; a ROTEL_* variable already set in the
# environment wins over the file, and command-line flags win over both. rotel-agent is the
# binary shipped in the `rotel` PyPI package (`pip install rotel==0.0.1a15`); set ROTEL_AGENT to
# use another one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
backend="${1:?usage: run.sh phoenix|jaeger|tempo [rotel-agent start flags]}"
shift
[ -f "$here/$backend.env" ] || { echo "no such backend: $backend ($here/$backend.env)" >&2; exit 2; }

load_env() {
  local key value
  while IFS='=' read -r key value; do
    [[ "$key" =~ ^[A-Z][A-Z0-9_]*$ ]] || continue
    [ -n "${!key+x}" ] || export "$key=$value"
  done < "$1"
}
load_env "$here/receive.env"
load_env "$here/$backend.env"

if [ -z "${ROTEL_AGENT:-}" ]; then
  python="python3"
  [ -x "$here/../../.venv/bin/python" ] && python="$here/../../.venv/bin/python"
  ROTEL_AGENT="$("$python" -c 'import pathlib, rotel; print(pathlib.Path(rotel.__file__).with_name("rotel-agent"))')"
fi
exec "$ROTEL_AGENT" start "$@"
