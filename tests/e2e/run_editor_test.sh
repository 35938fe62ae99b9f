#!/usr/bin/env bash
# Runs one real-editor end-to-end test against `wavecast serve` on a private
# copy of samples/small_cnn.py:  run_editor_test.sh nvim|emacs|node WAVECAST_BIN
# Exits 77 (ctest: skipped) when the editor is not installed.
set -euo pipefail
kind=$1
export WAVECAST_BIN=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/wavecast-e2e-XXXXXX")
# Not exec: the trap removes the copy when the editor exits.
trap 'rm -rf "$work"' EXIT
cp "$root/samples/small_cnn.py" "$work/small_cnn.py"
export WAVECAST_SAMPLE=$work/small_cnn.py
export HOME=$work # no user configuration of the editors

case "$kind" in
nvim)
  command -v nvim >/dev/null || { echo "nvim not installed (apt neovim)"; exit 77; }
  nvim --headless --clean -c "luafile $here/nvim/hover_lens_diagnostics.lua"
  ;;
emacs)
  command -v emacs >/dev/null || { echo "emacs not installed (apt emacs-nox elpa-eglot)"; exit 77; }
  emacs --batch -l "$here/emacs/hover_diagnostics.el" # site-start puts Debian's eglot on the load path
  ;;
node)
  [ -d "$here/node/node_modules/vscode-languageserver-protocol" ] ||
    { echo "run 'npm ci' in tests/e2e/node first"; exit 77; }
  cd "$here/node"
  node --test --test-concurrency=1 serve.test.mjs trace_store.test.mjs parallel.test.mjs compile.test.mjs
  ;;
*)
  echo "usage: run_editor_test.sh nvim|emacs|node WAVECAST_BIN" >&2
  exit 2
  ;;
esac
