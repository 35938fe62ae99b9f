"""The benchmark cases of cases.json, as runnable workloads.

A case names a kind (linear, conv2d, sdpa, ...) and its sizes; `build` turns one case at
one precision into a Workload: tensors made once, and the forward, backward and optimizer
steps that the suite runs under its op timer. Which ATen ops a step dispatches is up to
torch, exactly as when a script runs them: the suite records each op as the tracer does.
"""

import contextlib
import json
import os

import torch
import torch.nn.functional as F

CASES_FORMAT = "wavecast-calibration-cases"
CASES_VERSION = 1
CASES_FILE = os.path.join(os.path.dirname(__file__), "cases.json")

# The precisions a case can run in: the tensors' dtype and whether float32 matrix math
# runs on TF32 tensor cores (torch.backends.cuda.matmul / cudnn allow_tf32).
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


class CaseError(Exception):
    """A case this torch or GPU cannot run (a missing SDPA backend, an op without a kernel)."""


def load_cases(path=CASES_FILE):
    with open(path) as f:
        doc = json.load(f)
    if doc.get("format") != CASES_FORMAT or doc.get("version") != CASES_VERSION:
        raise ValueError(f"{path}: not a {CASES_FORMAT} file of version {CASES_VERSION}")
    return doc["cases"]


class Workload:
    """One case at one precision: steps to run, each (phase, callable)."""

    def __init__(self, steps, context=contextlib.nullcontext):
        self.steps = steps  # [(phase, fn)], run in order each iteration
        self.context = context  # entered around every iteration (an SDPA backend choice)


@contextlib.contextmanager
def tf32(enabled):
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def _grad_steps(forward, leaves):
    """Forward, then backward from a ones gradient made in the untimed warm-up."""
    state = {}

    def fwd():
        for leaf in leaves:
            leaf.grad = None  # each backward writes fresh gradients, as after zero_grad()
        state["out"] = forward()

    def bwd():
        out = state.pop("out")
        grad = state.get("grad")
        if grad is None or grad.shape != out.shape:
            grad = state["grad"] = torch.ones_like(out)
        out.backward(grad)

    return fwd, bwd


def _tensor(shape, dtype, device, grad=False):
    t = torch.randn(*shape, dtype=dtype, device=device) if dtype.is_floating_point else torch.zeros(
        *shape, dtype=dtype, device=device)
    return t.requires_grad_(grad)


def _linear(p, dtype, device, grad):
    x = _tensor([p["tokens"], p["in_features"]], dtype, device, grad)
    w = _tensor([p["out_features"], p["in_features"]], dtype, device, grad)
    b = _tensor([p["out_features"]], dtype, device, grad) if p.get("bias") else None
    return (lambda: F.linear(x, w, b)), [t for t in (x, w, b) if t is not None]


def _matmul(p, dtype, device, grad):
    a, b = _tensor(p["a"], dtype, device, grad), _tensor(p["b"], dtype, device, grad)
    return (lambda: torch.matmul(a, b)), [a, b]


def _grouped_mm(p, dtype, device, grad):
    """A mixture of experts' experts as one grouped GEMM (torch._grouped_mm), as transformers
    runs them: `tokens` (token, expert) rows sorted by expert and spread evenly over the
    `experts` (as wavecast takes a router's picks), each times its expert's weight, stored
    [out, in] and passed transposed."""
    experts, tokens = p["experts"], p["tokens"]
    x = _tensor([tokens, p["in_features"]], dtype, device, grad)
    w = _tensor([experts, p["out_features"], p["in_features"]], dtype, device, grad)
    offsets = torch.arange(1, experts + 1, dtype=torch.int32, device=device) * (tokens // experts)
    if not hasattr(torch, "_grouped_mm"):
        raise CaseError("this torch has no torch._grouped_mm")
    return (lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offsets)), [x, w]


def _fft(p, dtype, device, grad):
    """A spectral layer's transforms (a Fourier neural operator's): rfft2 of a real
    `shape` and irfft2 back, over its last two dimensions."""
    x = _tensor(p["shape"], dtype, device, grad)
    size = tuple(p["shape"][-2:])
    return (lambda: torch.fft.irfft2(torch.fft.rfft2(x), s=size)), [x]


def _conv2d(p, dtype, device, grad):
    """A convolution, or with "transposed" a transposed one (a generator's upsampling);
    "input_grad": false for a network's first layer, whose input (the batch) needs no
    gradient, so its backward computes the weight's alone."""
    fmt = torch.channels_last if p.get("channels_last") else torch.contiguous_format
    transposed = p.get("transposed", False)
    x = torch.randn(p["batch"], p["in_channels"], p["size"], p["size"], dtype=dtype, device=device)
    # conv: (out, in / groups, k, k); transposed: (in, out / groups, k, k)
    w_shape = ([p["in_channels"], p["out_channels"] // p["groups"]] if transposed
               else [p["out_channels"], p["in_channels"] // p["groups"]])
    w = torch.randn(*w_shape, p["kernel"], p["kernel"], dtype=dtype, device=device)
    x = x.to(memory_format=fmt).requires_grad_(grad and p.get("input_grad", True))
    w = w.to(memory_format=fmt).requires_grad_(grad)
    b = _tensor([p["out_channels"]], dtype, device, grad) if p.get("bias") else None
    conv = F.conv_transpose2d if transposed else F.conv2d
    return (lambda: conv(x, w, b, stride=p["stride"], padding=p["padding"], groups=p["groups"])), \
        [t for t in (x, w, b) if t is not None]


def _batch_norm(p, dtype, device, grad):
    """Training-mode batch norm as autocast runs it: the activation in the case's dtype, the
    affine parameters and running statistics in float32 (autocast leaves the module's)."""
    fmt = torch.channels_last if p.get("channels_last") else torch.contiguous_format
    x = _tensor(p["shape"], dtype, device).to(memory_format=fmt).requires_grad_(grad)
    channels = p["shape"][1]
    weight, bias = (_tensor([channels], torch.float32, device, grad) for _ in range(2))
    mean = torch.zeros(channels, device=device)
    var = torch.ones(channels, device=device)
    return (lambda: F.batch_norm(x, mean, var, weight, bias, training=True)), [x, weight, bias]


def _pool2d(p, dtype, device, grad):
    fmt = torch.channels_last if p.get("channels_last") else torch.contiguous_format
    x = _tensor(p["shape"], dtype, device).to(memory_format=fmt).requires_grad_(grad)
    pool = F.max_pool2d if p["op"] == "max" else F.avg_pool2d
    return (lambda: pool(x, p["kernel"], p["stride"], p["padding"])), [x]


def _sdpa_context(backend):
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        raise CaseError("this torch has no torch.nn.attention.sdpa_kernel (torch < 2.3)") from None
    names = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
             "cudnn": "CUDNN_ATTENTION", "math": "MATH"}
    chosen = getattr(SDPBackend, names[backend], None)
    if chosen is None:
        raise CaseError(f"this torch has no {backend} attention backend")
    return lambda: sdpa_kernel([chosen])


def _sdpa(p, dtype, device, grad):
    shape = [p["batch"], p["heads"], p["length"], p["head_dim"]]
    q, k, v = (_tensor(shape, dtype, device, grad) for _ in range(3))
    return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=p["causal"])), [q, k, v]


def _norm(kind):
    def build(p, dtype, device, grad):
        x = _tensor(p["shape"], dtype, device, grad)
        w = _tensor(p["shape"][-1:], dtype, device, grad)
        if kind == "layer_norm":
            b = _tensor(p["shape"][-1:], dtype, device, grad)
            return (lambda: F.layer_norm(x, p["shape"][-1:], w, b)), [x, w, b]
        if not hasattr(F, "rms_norm"):
            raise CaseError("this torch has no rms_norm (torch < 2.4)")
        return (lambda: F.rms_norm(x, p["shape"][-1:], w)), [x, w]

    return build


def _softmax(log):
    def build(p, dtype, device, grad):
        x = _tensor(p["shape"], dtype, device, grad)
        fn = F.log_softmax if log else F.softmax
        return (lambda: fn(x, dim=p["dim"])), [x]

    return build


def _cross_entropy(p, dtype, device, grad):
    logits = _tensor([p["rows"], p["classes"]], dtype, device, grad)
    target = torch.randint(0, p["classes"], (p["rows"],), device=device) if device != "meta" else \
        torch.zeros(p["rows"], dtype=torch.long, device=device)
    return (lambda: F.cross_entropy(logits, target)), [logits]


def _ctc_loss(p, dtype, device, grad):
    """A speech recogniser's CTC loss over `frames` log-probabilities per sequence and
    `labels` targets (wav2vec2's); its kernels walk the frames one step at a time."""
    frames, batch, classes, labels = p["frames"], p["batch"], p["classes"], p["labels"]
    log_probs = _tensor([frames, batch, classes], dtype, device, grad)
    targets = torch.ones(batch, labels, dtype=torch.long, device=device)
    if device != "meta":
        targets = torch.randint(1, classes, (batch, labels), device=device)
    input_lengths = torch.full((batch,), frames, dtype=torch.long, device=device)
    target_lengths = torch.full((batch,), labels, dtype=torch.long, device=device)
    return (lambda: F.ctc_loss(log_probs, targets, input_lengths, target_lengths)), [log_probs]


def _recurrent(p, dtype, device, grad):
    """A recurrent layer (nn.LSTM, nn.GRU) over a whole sequence. On an NVIDIA GPU it runs
    as one cuDNN op forward and one backward, whose kernels run on several streams at once
    (layers as a wavefront, directions side by side): what its elapsed time holds and a
    kernel sum does not. Elsewhere torch splits it into per-step ops no trace records."""
    if torch.device(device).type != "cuda" or torch.version.hip:
        raise CaseError("a recurrent layer runs as one op only on cuDNN (an NVIDIA GPU)")
    layer_type = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU}[p["mode"]]
    layer = layer_type(p["input"], p["hidden"], num_layers=p["layers"], bidirectional=p["bidirectional"],
                       batch_first=p["batch_first"], dropout=p.get("dropout", 0.0))
    layer = layer.to(device=device, dtype=dtype)
    steps_and_batch = [p["batch"], p["steps"]] if p["batch_first"] else [p["steps"], p["batch"]]
    x = _tensor(steps_and_batch + [p["input"]], dtype, device, grad)
    return (lambda: layer(x)[0]), [x, *layer.parameters()]


_ELEMENTWISE = {
    "add": lambda x, y: x + y,
    "mul": lambda x, y: x * y,
    "gelu": lambda x, _: F.gelu(x),
    "relu": lambda x, _: F.relu(x),
    "silu": lambda x, _: F.silu(x),
    "tanh": lambda x, _: torch.tanh(x),
    "sigmoid": lambda x, _: torch.sigmoid(x),
    "dropout": lambda x, _: F.dropout(x, 0.1, training=True),
}


def _elementwise(p, dtype, device, grad):
    fn = _ELEMENTWISE[p["op"]]
    x, y = _tensor(p["shape"], dtype, device, grad), _tensor(p["shape"], dtype, device, grad)
    return (lambda: fn(x, y)), [x, y]


def _reduction(p, dtype, device, grad):
    x = _tensor(p["shape"], dtype, device, grad)
    fn = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax}[p["op"]]
    return (lambda: fn(x, dim=p["dim"])), [x]


def _embedding(p, dtype, device, grad):
    w = _tensor([p["vocab"], p["dim"]], dtype, device, grad)
    idx = torch.zeros(p["indices"], dtype=torch.long, device=device)
    if device != "meta":
        idx = torch.randint(0, p["vocab"], tuple(p["indices"]), device=device)
    return (lambda: F.embedding(idx, w)), [w]


def _cast(p, dtype, device):
    x = _tensor(p["shape"], dtype, device)
    to = getattr(torch, p["to"])
    return Workload([("forward", lambda: x.to(to, copy=True))])


def _copy(p, dtype, device):
    x = _tensor(p["shape"], dtype, device)
    op = p["op"]
    if op == "clone":
        fn = lambda: x.clone()  # noqa: E731
    elif op == "transpose_copy":
        fn = lambda: x.t().contiguous()  # noqa: E731
    elif op == "permute":  # a head split or merge, or k.transpose(-2, -1) made contiguous
        fn = lambda: x.permute(*p["dims"]).contiguous()  # noqa: E731
    elif op == "cat":
        fn = lambda: torch.cat([x, x, x, x], dim=-1)  # noqa: E731
    else:
        fn = lambda: x.contiguous(memory_format=torch.channels_last)  # noqa: E731
    return Workload([("forward", fn)])


def _optimizer(p, dtype, device):
    params = []
    for group in p["params"]:
        for _ in range(group["count"]):
            param = torch.nn.Parameter(_tensor(group["shape"], dtype, device))
            param.grad = torch.randn_like(param)
            params.append(param)
    kwargs = {"foreach": True} if p["impl"] == "foreach" else {"fused": True}
    if p["optimizer"] == "sgd":
        opt = torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kwargs)
    else:
        cls = torch.optim.AdamW if p["optimizer"] == "adamw" else torch.optim.Adam
        try:
            opt = cls(params, lr=1e-3, **kwargs)
        except (RuntimeError, TypeError) as exc:
            raise CaseError(str(exc).splitlines()[0]) from None
    return Workload([("optimizer", opt.step)])


_WITH_GRAD = {
    "linear": _linear, "matmul": _matmul, "grouped_mm": _grouped_mm, "fft": _fft, "conv2d": _conv2d, "batch_norm": _batch_norm,
    "pool2d": _pool2d, "sdpa": _sdpa,
    "layer_norm": _norm("layer_norm"), "rms_norm": _norm("rms_norm"),
    "softmax": _softmax(False), "log_softmax": _softmax(True),
    "cross_entropy": _cross_entropy, "ctc_loss": _ctc_loss, "elementwise": _elementwise, "reduction": _reduction,
    "embedding": _embedding, "rnn": _recurrent,
}
_NO_GRAD = {"cast": _cast, "copy": _copy, "optimizer": _optimizer}
KINDS = frozenset(_WITH_GRAD) | frozenset(_NO_GRAD)


def build(case, precision, device):
    """The Workload of `case` at `precision` on `device`; CaseError when it cannot run here."""
    dtype = DTYPES[precision]
    kind, params = case["kind"], case["params"]
    context = contextlib.nullcontext
    if kind == "sdpa":
        context = _sdpa_context(params["backend"])
    if kind in _NO_GRAD:
        workload = _NO_GRAD[kind](params, dtype, device)
    else:
        backward = case.get("backward", True)
        forward, leaves = _WITH_GRAD[kind](params, dtype, device, backward)
        if not backward:
            workload = Workload([("forward", forward)])
        else:
            workload = Workload(list(zip(("forward", "backward"), _grad_steps(forward, leaves))))
    outer = context

    @contextlib.contextmanager
    def run_context():
        with tf32(precision == "tf32"), outer():
            yield

    workload.context = run_context
    return workload
