"""Records each call of a recurrent layer (nn.LSTM, nn.GRU, nn.RNN) as one fused op.

On a GPU cuDNN runs a whole multi-layer, multi-step RNN as one op forward
(`aten::lstm` -> `_cudnn_rnn`) and one backward (`_cudnn_rnn_backward`); on
the CPU torch decomposes it into per-step cell ops (~18,000 for GNMT), which
is neither what a GPU runs nor what the predictor's RNN formulas take. The
modules call `torch._VF.<kind>`, so that is where the call is replaced by an
autograd Function that records the fused forward and backward ops and hides
the decomposed ones.
"""

import contextlib

import torch

from . import compat
from .devices import actual_device
from .op_description import tensor_meta

# cuDNN's RNN mode numbers (cudnnRNNMode_t), also the predictor's gate count key.
CUDNN_MODES = {"rnn_relu": 0, "rnn_tanh": 1, "lstm": 2, "gru": 3}
BACKWARD_NAME = "aten::_cudnn_rnn_backward"
# cuDNN's reserve space, which a training forward fills for the backward and torch's meta
# kernel leaves empty: per (time step x batch row x hidden unit x direction), elements of
# the layer's dtype for each layer's gate activations and cell (LSTM 5, GRU 6) and for
# each output passed to the next layer, plus a small header. Exact for LSTM and GRU in
# float32 and float16 with cuDNN 9.19 on an H100 and an H200
# (bench/truth/data/*/rnn_reserve.json, bench/truth/rnn_reserve.py); the plain RNNs were
# not measured, and get none.
RESERVE_PER_LAYER = {"lstm": 5, "gru": 6}
RESERVE_HEADER_BYTES = 256


class _RecurrentCall:
    """One `_VF.<kind>(...)` call: its arguments, split into tensors and the rest."""

    def __init__(self, state, kind, original, compute_values, args):
        self.state = state
        self.kind = kind
        self.original = original
        self.compute_values = compute_values
        if isinstance(args[2], (list, tuple)):
            # input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first
            (self.input, hx, params, self.has_biases, self.num_layers, self.dropout, self.train,
             self.bidirectional, self.batch_first) = args
            self.batch_sizes = None
        else:  # a PackedSequence: data, batch_sizes, hx, params, has_biases, ..., bidirectional
            (self.input, self.batch_sizes, hx, params, self.has_biases, self.num_layers,
             self.dropout, self.train, self.bidirectional) = args
            self.batch_first = False
        self.hx_is_tuple = isinstance(hx, (list, tuple))
        self.hx = list(hx) if self.hx_is_tuple else [hx]
        self.params = list(params)
        self.forward_index = None

    def tensors(self):
        return [self.input, *self.hx, *self.params]

    def run(self, tensors):
        """Calls the real op on `tensors` (same order as tensors())."""
        if tensors[0].dtype == torch.float16 and actual_device(tensors[0]).type == "cpu":
            # Autocast's float16 layer, run for real where the CPU has no float16 RNN.
            outputs = self.run([t.float() if t.is_floating_point() else t for t in tensors])
            return tuple(o.to(torch.float16) for o in outputs)
        count = len(self.hx)
        input, hx, params = tensors[0], tensors[1:1 + count], list(tensors[1 + count:])
        hx = tuple(hx) if self.hx_is_tuple else hx[0]
        if self.batch_sizes is None:
            return self.original(input, hx, params, self.has_biases, self.num_layers, self.dropout,
                                 self.train, self.bidirectional, self.batch_first)
        return self.original(input, self.batch_sizes, hx, params, self.has_biases, self.num_layers,
                             self.dropout, self.train, self.bidirectional)

    def reserve_bytes(self, input):
        """The reserve space cuDNN allocates for this call's backward (0 when it keeps none)."""
        per_layer = RESERVE_PER_LAYER.get(self.kind)
        if per_layer is None or not self.train:
            return 0
        if self.batch_sizes is None:
            rows = input.numel() // max(1, int(input.shape[-1]))  # time steps x batch
        else:
            rows = int(input.shape[0])  # a packed sequence: the sum of its batch sizes
        layers = int(self.num_layers)
        directions = 2 if self.bidirectional else 1
        units = rows * int(self.hx[-1].shape[-1]) * directions * (per_layer * layers + layers - 1)
        return units * input.element_size() + RESERVE_HEADER_BYTES

    def output_shapes(self):
        directions = 2 if self.bidirectional else 1
        output = list(self.input.shape[:-1]) + [directions * int(self.hx[0].shape[-1])]
        return [output] + [list(h.shape) for h in self.hx]

    def args(self):
        hidden = int(self.hx[-1].shape[-1])  # LSTM: c's size; the others: h's
        out_size = int(self.hx[0].shape[-1])
        steps = None if self.batch_sizes is None else int(self.batch_sizes.shape[0])
        return _layer_args(CUDNN_MODES[self.kind], self.input, self.hx[0], hidden,
                           out_size if out_size != hidden else 0, self.num_layers,
                           self.bidirectional, self.batch_first, steps, self.dropout, self.train,
                           self.has_biases)


def _layer_args(mode, input, hx, hidden_size, proj_size, num_layers, bidirectional, batch_first,
                packed_steps, dropout, train, bias):
    """A recurrent layer's arguments as its trace op records them (the predictor's RNN
    formulas read them); `packed_steps`: a packed sequence's time steps, else None."""
    if packed_steps is None:
        seq_len = int(input.shape[1 if batch_first else 0])
    else:
        seq_len = packed_steps  # one batch size per time step
    return {
        "mode": int(mode),
        "input_size": int(input.shape[-1]),
        "hidden_size": int(hidden_size),
        "proj_size": int(proj_size),
        "num_layers": int(num_layers),
        "bidirectional": bool(bidirectional),
        "batch_first": bool(batch_first),
        "seq_len": seq_len,
        "batch": int(hx.shape[1]),
        "packed": packed_steps is not None,
        "dropout": float(dropout),
        "train": bool(train),
        "bias": bool(bias),
    }


def as_traced_layer(name, args, out):
    """A dispatched cuDNN RNN op, what a recurrent layer runs on an NVIDIA GPU, as a trace
    records the layer: (name, inputs, outputs, args), or None for any other op. The
    calibration times `_cudnn_rnn` and `_cudnn_rnn_backward`; a trace has `aten::<kind>`
    (input, states, weights) forward and `_cudnn_rnn_backward` (the same, then the
    outputs' gradients) backward, so its entries must be described as those.
    `_cudnn_rnn(input, weight[], weight_stride0, weight_buf, hx, cx, mode, hidden_size,
    proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes, ...)`;
    the backward has `output, grad_output, grad_hy, grad_cy` after `cx`."""
    if name == "aten::_cudnn_rnn":
        input, weights, stride, _, hx, cx = args[:6]
        settings = args[6:15]
        grads_out = []
    elif name == BACKWARD_NAME:
        input, weights, stride, _, hx, cx, _, grad_output, grad_hy, grad_cy = args[:10]
        settings = args[10:19]
        grads_out = [grad_output, grad_hy] + ([grad_cy] if cx is not None else [])
    else:
        return None
    mode, hidden, proj, layers, batch_first, dropout, train, bidirectional, batch_sizes = settings
    states = [hx] if cx is None else [hx, cx]
    # Per layer and direction: w_ih, w_hh, then b_ih, b_hh with biases, then w_hr with a projection.
    bias = int(stride) - (1 if proj else 0) == 4
    op_args = _layer_args(mode, input, hx, hidden, proj, layers, bidirectional, batch_first,
                          len(batch_sizes) if batch_sizes else None, dropout, train, bias)
    inputs = [tensor_meta(t) for t in (input, *states, *weights)]
    if name == BACKWARD_NAME:
        inputs += [tensor_meta(g) if g is not None else None for g in grads_out]
        d_input, d_hx, d_cx, d_weights = out
        outputs = [g for g in (d_input, d_hx, d_cx, *d_weights) if g is not None]
        return name, inputs, outputs, op_args
    kind = next(k for k, m in CUDNN_MODES.items() if m == mode)
    return f"aten::{kind}", inputs, list(out[:len(states) + 1]), op_args


class _FusedRecurrent(torch.autograd.Function):
    @staticmethod
    def forward(ctx, call, *tensors):
        ctx.call = call
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*tensors)
        with call.state.suppressing():
            # Allocated before the outputs, as cuDNN's forward takes it; kept until the
            # backward has run, or dropped at once when no gradient will be asked for.
            reserve_bytes = call.reserve_bytes(tensors[0])
            if reserve_bytes:
                reserve = tensors[0].new_empty((reserve_bytes,), dtype=torch.uint8)
                ctx.reserve = reserve if any(ctx.needs_input_grad) else None
            if call.compute_values:
                return tuple(call.run(list(tensors)))
            return tuple(tensors[0].new_empty(shape) for shape in call.output_shapes())

    @staticmethod
    def backward(ctx, *grad_outputs):
        call = ctx.call
        tensors = ctx.saved_tensors
        needed = ctx.needs_input_grad[1:]
        with call.state.suppressing():
            if call.compute_values:
                grads = _recompute_grads(call, tensors, needed, grad_outputs)
            else:
                grads = [t.new_empty(t.shape) if need else None for t, need in zip(tensors, needed)]
        inputs = [tensor_meta(t) for t in tensors]
        inputs += [tensor_meta(g) if g is not None else None for g in grad_outputs]
        call.state.append_op(BACKWARD_NAME, inputs, [g for g in grads if g is not None], call.args())
        ctx.reserve = None  # freed once the backward op has run
        return (None, *grads)


def _recompute_grads(call, tensors, needed, grad_outputs):
    """Real gradients on the CPU: reruns the decomposed op with autograd and differentiates it."""
    with torch.enable_grad():
        leaves = [t.detach().requires_grad_(need) for t, need in zip(tensors, needed)]
        outputs = call.run(leaves)
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if g is not None]
        wanted = [leaf for leaf in leaves if leaf.requires_grad]
        if not pairs or not wanted:
            return [None] * len(tensors)
        computed = iter(torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs],
                                            allow_unused=True))
    return [next(computed) if leaf.requires_grad else None for leaf in leaves]


def _autocast(recurrent):
    """CUDA autocast's `_cudnn_rnn` wrapper (aten/src/ATen/cudnn/AutocastRNN.cpp): inside
    an autocast region of either 16-bit dtype, the weights are copied into one float16
    buffer and the input and states cast to float16, every call; cuDNN runs the layer in
    float16 and its outputs are float16."""
    if compat.cuda_autocast_dtype() not in (torch.float16, torch.bfloat16):
        return
    half = torch.float16

    def cast(t):
        return t.to(half) if t.is_floating_point() and t.dtype != half else t

    recurrent.params = [cast(p) for p in recurrent.params]
    recurrent.input = cast(recurrent.input)
    recurrent.hx = [cast(h) for h in recurrent.hx]


def _fused(state, kind, original, compute_values):
    def call(*args):
        recurrent = _RecurrentCall(state, kind, original, compute_values, args)
        _autocast(recurrent)
        tensors = recurrent.tensors()
        outputs = _FusedRecurrent.apply(recurrent, *tensors)
        state.append_op(f"aten::{kind}", [tensor_meta(t) for t in tensors], list(outputs),
                        recurrent.args())
        return outputs

    return call


@contextlib.contextmanager
def fuse_recurrent_layers(state, compute_values):
    """While active, every `torch._VF.{lstm,gru,rnn_tanh,rnn_relu}` call is one fused op, and
    in shape mode (`compute_values` false) `_pad_packed_sequence` runs as _pad_packed."""
    vf = torch._VF
    replaced = {kind: _fused(state, kind, getattr(vf, kind), compute_values) for kind in CUDNN_MODES}
    if not compute_values:
        replaced[_PAD_PACKED] = _pad_packed
    saved = {name: vf.__dict__.get(name) for name in replaced}
    for name, function in replaced.items():
        setattr(vf, name, function)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                delattr(vf, name)  # VFModule resolves it from torch._C again
            else:
                setattr(vf, name, value)


_PAD_PACKED = "_pad_packed_sequence"


def _pad_packed(data, batch_sizes, batch_first, padding_value, total_length):
    """ATen's `_pad_packed_sequence` (aten/src/ATen/native/PackedSequence.cpp), op for op: its
    C++ makes the lengths as a host tensor and writes them through a data pointer, which a
    fake tensor has not. A GPU runs the same ops: a fill, then one copy per run of steps
    with the same batch size."""
    sizes = [int(b) for b in batch_sizes.tolist()]  # on the host, a GPU run's too
    max_batch = sizes[0]
    steps = len(sizes)
    if total_length != -1:
        if total_length < steps:
            raise RuntimeError(f"Expected total_length to be at least the length of the longest sequence "
                               f"({steps}), but got total_length={total_length}")
        steps_out = total_length
    else:
        steps_out = steps
    output = torch.full([steps_out, max_batch, *data.shape[1:]], padding_value, dtype=data.dtype,
                        device=data.device)
    lengths = [0] * max_batch
    offset, previous_batch, previous_step = 0, max_batch, 0
    for step in range(steps + 1):
        batch = sizes[step] if step != steps else 0
        if batch != previous_batch:
            count = previous_batch * (step - previous_step)
            chunk = data[offset:offset + count].view(step - previous_step, previous_batch, *data.shape[1:])
            output[previous_step:step, :previous_batch].copy_(chunk)
            offset += count
            previous_step = step
        for row in range(batch, previous_batch):  # the sequences ending here
            lengths[row] = step
        previous_batch = batch
    if batch_first:
        output = output.transpose(0, 1)
    with compat.real_execution():
        lengths = torch.tensor(lengths, dtype=torch.int64)
    return output, lengths
