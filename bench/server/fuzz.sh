#!/usr/bin/env bash
# The server fuzzer's bench run: libFuzzer on wavecast serve's framing, dispatch
# and every handler's params (tests/server/fuzz_server.cpp) for SECONDS (default
# 600), from the kept corpus into a scratch folder. Prints libFuzzer's final
# figures; a crash leaves its input in the scratch folder and fails the run.
# Fix it, then copy the input into tests/server/fuzz_corpus, which ctest replays
# (server_fuzz_corpus).
#
#   bench/server/fuzz.sh [SECONDS]
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${WAVECAST_BUILD_DIR:-$root/build}
fuzzer=$build/tests/server/fuzz_server
[[ -x "$fuzzer" ]] || { echo "fuzz.sh: no $fuzzer (it needs clang: scripts/setup.sh test installs it)" >&2; exit 1; }
seconds=${1:-600}
scratch=$(mktemp -d)
log=$scratch/fuzz.log
cd "$scratch" # libFuzzer writes crash-* inputs into the working folder
mkdir -p "$scratch/corpus"
status=0
"$fuzzer" -max_total_time="$seconds" -max_len=4096 -print_final_stats=1 \
  -dict="$root/tests/server/fuzz_server.dict" "$scratch/corpus" "$root/tests/server/fuzz_corpus" \
  >"$log" 2>&1 || status=$?
grep -E "seed corpus|^#[0-9]+[[:space:]]+DONE|^stat::|^Done" "$log" || true
crashes=$(ls "$scratch" | grep -E '^(crash|leak|timeout|oom)-' || true)
if [[ $status -ne 0 || -n "$crashes" ]]; then
  echo "fuzz.sh: the fuzzer failed (exit $status); inputs and log in $scratch:" >&2
  echo "$crashes" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
echo "no crash in ${seconds} s; new inputs in $scratch/corpus ($(ls "$scratch/corpus" | wc -l) files)"
