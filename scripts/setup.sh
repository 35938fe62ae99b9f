#!/usr/bin/env bash
# Installs what is missing on Debian 12, builds wavecast, then runs one job:
#   scripts/setup.sh demo   -> headless prediction for a sample on three GPUs
#   scripts/setup.sh test   -> every test suite (ctest)
#   scripts/setup.sh build  -> only install and build
# Quick when nothing is missing: apt, npm and pip run only when something changed.
set -euo pipefail

job=${1:-build}
case "$job" in demo | test | build) ;; *)
  echo "usage: scripts/setup.sh demo|test|build" >&2
  exit 2
  ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${WAVECAST_BUILD_DIR:-$root/build}
mkdir -p "$build"
log=$build/setup.log
: >"$log"
# Progress and tool output go to a terminal; otherwise (CI, pipes) they go to
# $log, whose tail is printed only when a step fails.
if [ -t 2 ]; then
  say() { echo "[setup] $*" >&2; }
  step() { "$@" >&2; }
else
  say() { echo "[setup] $*" >>"$log"; }
  step() {
    if ! "$@" >>"$log" 2>&1; then
      echo "setup: '$*' failed; the last lines of $log:" >&2
      tail -n 60 "$log" >&2
      exit 1
    fi
  }
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

packages=(build-essential cmake ninja-build ccache pkg-config git
  python3 python3-dev python3-venv python3-torch python3-torchvision libtorch-dev
  pybind11-dev libboost-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev)
if [ "$job" = test ]; then
  # Real editors and a browser drive the end-to-end tests; clang builds the fuzzer;
  # jsonschema checks the encoders against protocol/schema (tests/server).
  packages+=(clang libclang-rt-14-dev neovim emacs-nox elpa-eglot chromium python3-jsonschema)
fi
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  step "${sudo_cmd[@]}" apt-get update -qq
  step "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm dependencies from lock files, re-installed only when a lock file changed.
npm_install() {
  local dir=$1
  [ -f "$dir/package-lock.json" ] || return 0
  local stamp="$dir/node_modules/.wavecast-lock-hash"
  local want
  want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    say "npm ci in ${dir#$root/}"
    step env -C "$dir" npm ci --no-audit --no-fund --loglevel=error
    echo "$want" >"$stamp"
  fi
}
if [ "$job" != demo ]; then
  npm_install "$root/vscode-extension"
  npm_install "$root/tests/e2e/node"
fi

# The worker's default Python environment: PyPI's torch 2.x (what users run)
# from a lock file with hashes, in a venv of the interpreter the worker embeds.
# The test lock is the runtime lock plus the model libraries tests/realworld
# builds from, so an environment made for tests also serves the demo.
python_env=$build/python-env
python_env_changed=0
python_env_install() {
  local lock=$root/scripts/python-env/$1.lock
  local stamp=$python_env/.wavecast-lock
  local want have
  want="$1 $(sha256sum "$lock" | cut -d' ' -f1)"
  have=$(cat "$stamp" 2>/dev/null || true)
  if [ "$have" = "$want" ]; then return 0; fi
  if [ "$1" = runtime ] && [ "$have" = "test $(sha256sum "$root/scripts/python-env/test.lock" | cut -d' ' -f1)" ]; then
    return 0
  fi
  # Wheels are kept in a cache outside the build (2.6 GB the first time), so a
  # clean clone or a new build folder installs without downloading again.
  local wheels=${WAVECAST_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wavecast/wheels}
  say "installing torch 2.x ($1.lock) into ${python_env#$root/}, wheels cached in $wheels"
  # A full disk fails deep inside pip with errno 28; say what is needed first.
  # The environment takes 5 GB installed; downloading the wheels 2.6 GB more.
  mkdir -p "$wheels"
  local need_env_mb=6000 need_wheels_mb=0 free_env_mb free_wheels_mb
  ls "$wheels"/torch-*.whl >/dev/null 2>&1 || need_wheels_mb=3000
  free_env_mb=$(df -Pm "$build" | awk 'NR == 2 { print $4 }')
  free_wheels_mb=$(df -Pm "$wheels" | awk 'NR == 2 { print $4 }')
  if [ "$(stat -c %d "$build")" = "$(stat -c %d "$wheels")" ]; then
    need_env_mb=$((need_env_mb + need_wheels_mb))
    need_wheels_mb=0
  fi
  local short=()
  [ "$free_env_mb" -ge "$need_env_mb" ] || short+=("$build needs about $need_env_mb MB free and has $free_env_mb MB")
  [ "$free_wheels_mb" -ge "$need_wheels_mb" ] ||
    short+=("the wheel cache $wheels needs about $need_wheels_mb MB free and has $free_wheels_mb MB")
  if [ ${#short[@]} -gt 0 ]; then
    local joined
    joined=$(printf '%s; ' "${short[@]}")
    echo "setup: not enough disk space to install torch 2.x: ${joined%; }." \
      "Free some (old build folders and clones of this repository take 5-7 GB each)," \
      "or point WAVECAST_BUILD_DIR or WAVECAST_WHEEL_CACHE at a larger disk." >&2
    exit 1
  fi
  [ -x "$python_env/bin/python" ] || step /usr/bin/python3 -m venv "$python_env"
  step "$python_env/bin/python" -m pip download --quiet --disable-pip-version-check \
    --require-hashes --no-deps -r "$lock" -d "$wheels"
  step "$python_env/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-index --find-links "$wheels" --require-hashes --no-deps -r "$lock"
  echo "$want" >"$stamp"
  python_env_changed=1
}
if [ "$job" = test ]; then python_env_install test; else python_env_install runtime; fi

if [ ! -f "$build/build.ninja" ]; then
  say "configuring $build"
  step cmake -S "$root" -B "$build" -G Ninja -DPython3_EXECUTABLE=/usr/bin/python3
elif [ "$python_env_changed" = 1 ]; then
  # CMake looks for CUPTI in the environment's nvidia-cuda-cupti wheel.
  step cmake "$build"
fi
say "building (first build takes a few minutes on 2 cores)"
step cmake --build "$build" -j "$(nproc)"

case "$job" in
demo)
  "$build/bin/wavecast" predict "$root/samples/small_cnn.py" --gpu H100,A100,T4
  ;;
test)
  cd "$build"
  ctest --output-on-failure -j 2 --timeout 1200
  ;;
esac
