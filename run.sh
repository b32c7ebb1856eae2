#!/usr/bin/env bash
# One entry point that does all set-up itself (Debian 12, Python 3.11, root) and then runs:
#   bash run.sh demo      the main job: the end-to-end demo on the embedded humanoid
#   bash run.sh test      the test suite (what .ci/run calls); extra args go to pytest
#   bash run.sh <cmd...>  any `sparsedyn` subcommand, e.g. bash run.sh bench
# SPARSEDYN_DEPS picks the environment: "default" (.venv, what pip resolves on first use),
# "newest" (.venv-newest, upgraded to the newest releases once a day) or "oldest" (.venv-oldest,
# the oldest supported numpy/scipy/numba/networkx, .ci/oldest.txt).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
DEPS=${SPARSEDYN_DEPS:-default}
case "$DEPS" in
  default) VENV=.venv; pip_args=(); key=$(cat pyproject.toml) ;;
  newest) VENV=.venv-newest; pip_args=(--upgrade --upgrade-strategy eager)
          key="$(cat pyproject.toml) $(date -u +%F)" ;;
  oldest) VENV=.venv-oldest; pip_args=(-c .ci/oldest.txt); key=$(cat pyproject.toml .ci/oldest.txt) ;;
  *) echo "SPARSEDYN_DEPS: expected default, newest or oldest, got '$DEPS'" >&2; exit 2 ;;
esac
# each environment keeps its own numba cache (a kernel cached by another numba is recompiled)
[ "$DEPS" = default ] || export NUMBA_CACHE_DIR="$PWD/$VENV/numba-cache"

need_apt=()
dpkg -s libsuitesparse-dev >/dev/null 2>&1 || need_apt+=(libsuitesparse-dev)
# Eigen's headers: the experiments' Pinocchio C++ peers build against them (the pin wheel has none)
dpkg -s libeigen3-dev >/dev/null 2>&1 || need_apt+=(libeigen3-dev)
"$PY" -c "import venv, ensurepip" >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[setup] apt-get install ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# setup EXTRAS WARMUP: install sparsedyn[EXTRAS] into $VENV once per version of the inputs; with
# WARMUP=yes also compile every numba kernel into its cache. The demo (and any other command)
# needs only the library and Pinocchio (its comparison): its kernels compile on first use, a
# minute, instead of all of them (the test set-up's warm-up, ~3 min).
stamp_of() { printf '%s' "$VENV/.sparsedyn-setup-$1-$(printf '%s' "$key" | sha256sum | cut -c1-16)"; }
setup() {
  local extras=$1 warm=$2
  local stamp
  stamp=$(stamp_of "$extras")
  [ -f "$stamp" ] && return 0
  echo "[setup] installing sparsedyn[$extras] into $VENV (first run only)" >&2
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install -q ${pip_args[@]+"${pip_args[@]}"} -e ".[$extras]"
  if [ "$warm" = yes ]; then
    echo "[setup] compiling the numba kernels into their cache (first run only)" >&2
    "$VENV/bin/python" -m sparsedyn warmup >&2
  fi
  touch "$stamp"
}

cmd=${1:-demo}
shift || true
case "$cmd" in
  test) setup test yes; exec "$VENV/bin/python" -m pytest "$@" ;;
  *) [ -f "$(stamp_of test)" ] || setup demo no         # (the test set-up covers the demo's)
     exec "$VENV/bin/python" -m sparsedyn "$cmd" "$@" ;;
esac
