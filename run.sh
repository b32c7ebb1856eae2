#!/usr/bin/env bash
# One entry point that does all set-up itself (Debian 12, Python 3.11, root) and then runs:
#   bash run.sh demo      the main job: the end-to-end demo on the embedded humanoid
#   bash run.sh test      the test suite (what .ci/run calls); extra args go to pytest
#   bash run.sh <cmd...>  any `sparsedyn` subcommand, e.g. bash run.sh bench
set -euo pipefail
cd "$(dirname "$0")"
VENV=.venv
PY=${PYTHON:-python3}

need_apt=()
dpkg -s libsuitesparse-dev >/dev/null 2>&1 || need_apt+=(libsuitesparse-dev)
"$PY" -c "import venv, ensurepip" >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[setup] apt-get install ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

stamp="$VENV/.sparsedyn-setup-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "[setup] creating $VENV and installing sparsedyn[test] (first run only)" >&2
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install -q -e ".[test]"
  echo "[setup] compiling the numba kernels into their cache (first run only)" >&2
  "$VENV/bin/python" -m sparsedyn warmup >&2
  touch "$stamp"
fi

cmd=${1:-demo}
shift || true
case "$cmd" in
  test) exec "$VENV/bin/python" -m pytest "$@" ;;
  *) exec "$VENV/bin/python" -m sparsedyn "$cmd" "$@" ;;
esac
