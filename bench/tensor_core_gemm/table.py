"""OpenXLA's measured GEMM table (../shared/reference/xla-perf-tables/matmul.csv).

Each row is one batched GEMM [b, m, k] x [b, k, n] timed by XLA's
matmul_perf_table_gen (CUPTI kernel time, median of 5) on one GPU; its README
says how the CSV was extracted. Only what wavecast predicts is read: bf16 and
XLA's default f32 (which runs on TF32 tensor cores) on the NVIDIA GPUs.
"""

import csv
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
DEFAULT_CSV = os.path.join(ROOT, "..", "shared", "reference", "xla-perf-tables", "matmul.csv")
GPUS_JSON = os.path.join(ROOT, "data", "gpus.json")
# GPUs of the table that data/gpus.json lacks, in its format.
EXTRA_GPUS_JSON = os.path.join(HERE, "gpus.json")

# The table's arch -> wavecast GPU id.
ARCH_GPUS = {"sm_90": "H100-SXM", "sm_100_B200": "B200"}
# XLA's dtype key -> (tensor-core math, bytes per element).
DTYPES = {"bf16xbf16->bf16": ("bf16", 2), "f32xf32->f32": ("tf32", 4)}
# The grid of each dimension, for the held-out split.
GRID = {"b": [1, 2, 4], "mnk": [256, 512, 1024, 2048, 4096]}


class Row:
    def __init__(self, arch, dtype, element_bytes, b, m, n, k, seconds):
        self.arch, self.dtype, self.element_bytes = arch, dtype, element_bytes
        self.b, self.m, self.n, self.k = b, m, n, k
        self.seconds = seconds
        self.gpu = ARCH_GPUS[arch]

    @property
    def held_out(self):
        """A fixed quarter of the shapes, spread over the grid: those whose grid indices
        of b, m, n and k sum to a multiple of 4. The same shapes on every GPU and dtype."""
        index = GRID["b"].index(self.b) + sum(GRID["mnk"].index(d) for d in (self.m, self.n, self.k))
        return index % 4 == 0


def read_rows(path=DEFAULT_CSV):
    if not os.path.exists(path):
        raise SystemExit(f"{path}: not found (OpenXLA's GEMM table, see "
                         "../shared/reference/xla-perf-tables/README.md)")
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["arch"] not in ARCH_GPUS or r["dtype"] not in DTYPES:
                continue
            dtype, element_bytes = DTYPES[r["dtype"]]
            b, m, n, k = (int(r[d]) for d in "bmnk")
            seconds = 2 * b * m * n * k / float(r["flops_per_s"])
            rows.append(Row(r["arch"], dtype, element_bytes, b, m, n, k, seconds))
    return rows
