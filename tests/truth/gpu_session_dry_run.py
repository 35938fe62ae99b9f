"""bench/gpu_session.sh's dry run (no GPU): the calibration step writes its file into OUT.

Run as `python gpu_session_dry_run.py bench/gpu_session.sh` by the Python that has torch
(ctest's gpu_session_dry_run)."""

import json
import os
import subprocess
import sys
import tempfile


def main(script):
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, WAVECAST_GPU_SESSION_DRY="1", PYTHON=sys.executable)
        done = subprocess.run([script, out], env=env, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr
        with open(os.path.join(out, "nvidia-h100-80gb-hbm3.json")) as f:
            calibration = json.load(f)
        assert calibration["format"] == "wavecast-calibration", calibration.get("format")
        assert calibration["complete"] and calibration["entries"], "the dry run measured its case"
        assert "dry run" in done.stderr, done.stderr
    print("gpu_session.sh dry run: calibration file written")


if __name__ == "__main__":
    main(sys.argv[1])
