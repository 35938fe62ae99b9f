#!/usr/bin/env python3
"""Records cuDNN's RNN reserve space on a GPU: the bytes a training-mode LSTM/GRU keeps for
its backward, which torch.cuda.max_memory_allocated() counts and shape tracing cannot see
(torch's meta kernel for _cudnn_rnn returns an empty reserve).

For each (kind, input, hidden, layers, bidirectional, batch, steps, dtype) it runs the
layer forward on the GPU under a dispatch mode and reads the size of `_cudnn_rnn`'s fourth
output, and writes them with the bytes per layer x direction x step x batch x hidden unit.
The configurations are GNMT's layers (samples/gnmt.py) at the truth's batch sizes, plus
GRU and fp16 variants, so a formula can be told from the data.

    python3 bench/truth/rnn_reserve.py OUT.json
"""

import json
import sys

CONFIGS = [
    # kind, input, hidden, layers, bidirectional
    ("lstm", 1024, 512, 1, True),   # GNMT's bidirectional encoder layer
    ("lstm", 1024, 1024, 3, False),  # its encoder stack
    ("lstm", 2048, 1024, 3, False),  # its decoder stack
    ("gru", 1024, 1024, 3, False),
]
BATCHES = (16, 64, 256)
STEPS = 50
DTYPES = ("float32", "float16")


def reserve_bytes(torch, layer, x):
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Reserve(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten._cudnn_rnn.default:
                seen.append(out[3].numel() * out[3].element_size())
            return out

    with Reserve():
        layer(x)
    return seen[0] if seen else None


def main(out_path):
    import torch

    if not torch.cuda.is_available():
        sys.exit("rnn_reserve.py: no CUDA GPU visible to torch; run it on the GPU machine")
    rows = []
    for kind, features, hidden, layers, bidirectional in CONFIGS:
        for dtype_name in DTYPES:
            dtype = getattr(torch, dtype_name)
            cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
            layer = cls(features, hidden, num_layers=layers, bidirectional=bidirectional,
                        batch_first=True).cuda().to(dtype).train()
            for batch in BATCHES:
                x = torch.randn(batch, STEPS, features, device="cuda", dtype=dtype, requires_grad=True)
                size = reserve_bytes(torch, layer, x)
                units = layers * (2 if bidirectional else 1) * STEPS * batch * hidden
                rows.append({"kind": kind, "input": features, "hidden": hidden, "layers": layers,
                             "bidirectional": bidirectional, "batch": batch, "steps": STEPS,
                             "dtype": dtype_name, "reserve_bytes": size,
                             "bytes_per_unit": None if size is None else round(size / units, 3)})
                print(f"rnn_reserve.py: {rows[-1]}", file=sys.stderr)
            del layer
            torch.cuda.empty_cache()
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "rows": rows}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
