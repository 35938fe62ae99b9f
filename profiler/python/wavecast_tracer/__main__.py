"""python -m wavecast_tracer FILE [--batch-size N] [--mode shape|cpu|cuda] [--world-size N]: print the trace JSON."""

import argparse
import json
import sys

from .errors import TraceError
from .tracer import run_trace


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m wavecast_tracer")
    parser.add_argument("file")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--mode", default="shape")
    parser.add_argument("--world-size", type=int, help="ranks of a torch.distributed script's launch (default 8)")
    options = parser.parse_args(argv)
    try:
        document = run_trace(options.file, options.batch_size, options.mode,
                             progress=lambda message: print(message, file=sys.__stderr__),
                             world_size=options.world_size)
    except TraceError as error:
        json.dump({"error": error.to_json()}, sys.stdout)
        return 1
    json.dump(document, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
