#!/usr/bin/env bash
# Installs what is missing on Debian 12, builds wavecast, then runs one job:
#   scripts/setup.sh demo   -> headless prediction for a sample on three GPUs
#   scripts/setup.sh test   -> every test suite (ctest)
#   scripts/setup.sh build  -> only install and build
# Quick when nothing is missing: apt and npm run only when something changed.
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
  python3 python3-dev python3-torch python3-torchvision libtorch-dev
  pybind11-dev libboost-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev)
if [ "$job" = test ]; then
  # Real editors and a browser drive the end-to-end tests; clang builds the fuzzer.
  packages+=(clang libclang-rt-14-dev neovim emacs-nox elpa-eglot chromium)
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

if [ ! -f "$build/build.ninja" ]; then
  say "configuring $build"
  step cmake -S "$root" -B "$build" -G Ninja -DPython3_EXECUTABLE=/usr/bin/python3
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
