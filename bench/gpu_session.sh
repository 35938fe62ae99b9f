#!/usr/bin/env bash
# The checks a lent GPU machine is for, as one prepared command that fits one device call
# (at most 10 minutes): `wavecast calibrate` on that GPU (and a check of its timer), then
# the ground truth of every sample run of ../shared/truth/h100/sweep.json, with per-shape
# and bf16 per-op kernel times (bench/truth/record.py), then the memory each op holds only
# while it runs (cuDNN's convolution workspaces; bench/truth/workspace.py) and cuDNN's RNN
# reserve sizes (bench/truth/rnn_reserve.py).
# Each step has a time budget and keeps what it measured when the budget ends; the files
# land in OUT, which the device tool brings back.
#
#   bench/gpu_session.sh OUT       (from the repository root, on the GPU machine)
#
# It needs only Python with a CUDA torch (the machine's python3): no wavecast build, so no
# per-line truth (record.py --wavecast gives that where wavecast is built). Environment:
# PYTHON (default python3), CALIBRATE_S (default 270), TRUTH_S (default 230), WORKSPACE_S
# (default 120), COMPILED_S (default 0: torch.compile's truth, bench/truth/compiled.py); a
# step given 0 seconds is left out (a GPU whose truth is recorded already); TRUTH_RUNS and
# COMPILED_RUNS (space-separated SAMPLE:BATCH,...) replace the runs below, to record again
# only what an open question needs; WAVECAST_GPU_SESSION_DRY=1 (no GPU: the calibration's
# fake timer, no truth; for tests).
set -uo pipefail

out=${1:?usage: bench/gpu_session.sh OUT}
root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
calibrate_s=${CALIBRATE_S:-270}
truth_s=${TRUTH_S:-230}
workspace_s=${WORKSPACE_S:-120}
compiled_s=${COMPILED_S:-0}
mkdir -p "$out"
export PYTHONPATH="$root/profiler/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
cd "$root"

# Most informative first: the truth runs whose per-shape kernels the cost model lacks
# (batch norm, strided copies, small attention, cuDNN RNNs), a mixture of experts (its
# router's real spread, against the even one shape mode assumes), then the rest of the sweep.
runs=(samples/resnet50.py:32,128,256 samples/gpt2.py:8,1,16 samples/moe.py:16,64 samples/inception_v3.py:128,32
      samples/transformer.py:16,64,256 samples/gnmt.py:16,64,256 samples/small_cnn.py:64,1024
      samples/small_transformer.py:32,256 samples/dcgan.py:32,128,512 samples/resnet50.py:8)
if [[ -n "${TRUTH_RUNS:-}" ]]; then read -r -a runs <<<"$TRUTH_RUNS"; fi
# Compiled: the transformers whose generated attention kernels the model prices by their
# traffic alone (docs/predictor.md, "Compiled regions").
compiled_runs=(samples/transformer.py:64 samples/small_transformer.py:256)
if [[ -n "${COMPILED_RUNS:-}" ]]; then read -r -a compiled_runs <<<"$COMPILED_RUNS"; fi
# Transient memory: the runs whose peak is under-predicted first (convolution workspaces).
workspace_runs=(samples/dcgan.py:32,128,512 samples/small_cnn.py:64,1024 samples/resnet50.py:8,32,128
                samples/inception_v3.py:32,128 samples/gnmt.py:16,64 samples/gpt2.py:1,8
                samples/transformer.py:16,64 samples/small_transformer.py:32,256)

status=0
if [[ "${WAVECAST_GPU_SESSION_DRY:-}" == 1 ]]; then
  "$python" -m wavecast_tracer.calibrate --out-dir "$out" --timer fake --fake-gpu "NVIDIA H100 80GB HBM3" \
    --only "cast to bfloat16" --repeats 2 >"$out/calibrate.out" 2>"$out/calibrate.log" || status=1
  echo "gpu_session.sh: dry run (fake timer, no truth)" >&2
  exit $status
fi

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$out/gpu.csv" 2>&1
# calibrate stops starting cases at its budget and writes what it measured; the timeout is
# only for a hang.
if ((calibrate_s > 0)); then
  timeout $((calibrate_s + 120)) "$python" -m wavecast_tracer.calibrate --out-dir "$out" \
    --budget "$calibrate_s" >"$out/calibrate.out" 2>"$out/calibrate.log" || status=1
  # The small CNN's bf16 convolution backwards, calibrated at twice their kernels' time: the
  # events at three spins against torch.profiler's kernel time (seconds; docs/calibration.md).
  # Appended to the calibration's log: the device tool brings back at most 8 files.
  timeout 120 "$python" bench/truth/timer_check.py --precision bf16 "conv2d n64 c64 8x8 k128" \
    "conv2d n64 c32 16x16 k64" >>"$out/calibrate.log" 2>&1 || status=1
fi
# record.py and workspace.py rewrite their files after every run: a run cut off by the
# budget loses itself only.
if ((truth_s > 0)); then
  timeout "$truth_s" "$python" bench/truth/record.py "$out/truth.json" "${runs[@]}" \
    2>"$out/truth.log" || status=1
fi
if ((workspace_s > 0)); then
  timeout "$workspace_s" "$python" bench/truth/workspace.py "$out/workspace.json" "${workspace_runs[@]}" \
    2>>"$out/truth.log" || status=1
fi
# compiled.py starts no run past its budget; the timeout is for a compilation that hangs.
if ((compiled_s > 0)); then
  timeout $((compiled_s + 120)) "$python" bench/truth/compiled.py "$out/compiled.json" "${compiled_runs[@]}" \
    --budget "$compiled_s" 2>>"$out/truth.log" || status=1
fi
# cuDNN's RNN reserve space, which peak memory counts and shape tracing cannot see (seconds).
timeout 60 "$python" bench/truth/rnn_reserve.py "$out/rnn_reserve.json" 2>>"$out/truth.log" || status=1
tail -n 3 "$out"/*.log >&2
exit $status
