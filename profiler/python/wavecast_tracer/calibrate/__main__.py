"""python -m wavecast_tracer.calibrate (--out FILE | --out-dir DIR) [--quick]: benchmarks this
machine's GPU and writes a calibration file (docs/calibration.md).

Progress goes to stderr, one line per case. The last line on stdout is one JSON object for
`wavecast calibrate`: {"result": {"path", "entries", "complete", "gpu"}} or
{"error": {"message", "hint"}}. Exit status: 0 done, 1 this machine cannot calibrate,
130 interrupted (the file is written with what was measured, "complete": false).
"""

import argparse
import json
import os
import signal
import sys

CASES_FILE = os.path.join(os.path.dirname(__file__), "cases.json")


def _answer(payload):
    print(json.dumps(payload), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m wavecast_tracer.calibrate")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", help="the calibration file to write")
    where.add_argument("--out-dir", help="a folder: the file is named after the GPU")
    parser.add_argument("--quick", action="store_true", help="the quick cases, 2 minutes")
    parser.add_argument("--timer", choices=["events", "cupti", "fake"], default="events")
    parser.add_argument("--fake-gpu", help="the GPU name the fake timer reports")
    parser.add_argument("--budget", type=float, help="seconds (default: 120 quick, 600 full)")
    parser.add_argument("--repeats", type=int, help="timed iterations per case")
    parser.add_argument("--cases", default=CASES_FILE, help="the cases file")
    parser.add_argument("--only", action="append", default=[],
                        help="only cases whose name starts with this (repeatable)")
    options = parser.parse_args(argv)

    try:
        import torch  # noqa: F401 - the environment's own
    except ImportError as exc:
        _answer({"error": {"message": f"this Python environment ({sys.executable}) cannot import "
                                      f"torch: {exc}",
                           "hint": "pass --python-env a virtualenv with a CUDA build of PyTorch"}})
        return 1
    from . import suite as suite_module
    from .cases import load_cases
    from .timing import SetupError, make_timer

    try:
        timer = make_timer(options.timer, options.fake_gpu)
    except SetupError as error:
        _answer({"error": {"message": error.message, "hint": error.hint}})
        return 1
    cases = load_cases(options.cases)
    if options.only:
        cases = [c for c in cases if any(c["name"].startswith(prefix) for prefix in options.only)]
    gpu, versions = timer.describe()
    path = options.out or os.path.join(options.out_dir, suite_module.default_file_name(gpu["name"]))
    suite = suite_module.Suite(timer, options.quick, options.budget, options.repeats, cases=cases)
    print(f"calibrating {gpu['name']} with torch {versions['torch']}: {len(suite.work())} cases, "
          f"at most {suite.budget_s:.0f} s", file=sys.stderr, flush=True)
    # SIGINT reaches every process of the terminal's group; the parent waits for this one.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupted = False
    host = None
    try:
        suite.run()
        host = timer.host()
    except KeyboardInterrupt:
        interrupted = True
        suite.complete = False
    document = suite.document(gpu, versions, host)
    suite_module.write(document, path)
    _answer({"result": {"path": os.path.abspath(path), "entries": len(document["entries"]),
                        "complete": document["complete"], "gpu": gpu["name"]}})
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
