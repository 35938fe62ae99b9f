"""Real values for the small integer and boolean tensors of a shape-only trace.

Shape-only tracing computes no values, so ops whose output shape depends on
them (nonzero, masked_select, boolean-mask indexing, .item()) cannot run on
fake tensors. Such values nearly always come from labels, token ids and masks:
small integer/bool tensors, or from small float constants such as a causal
mask (`nn.Transformer.generate_square_subsequent_mask`, which torch 2.x's
nn.Transformer checks value by value). Those are also computed for real on the
CPU ("shadows"; a float one only when made without randomness from other
shadows, or when it is a tiny random draw such as LayerDrop's `torch.rand([])`,
drawn for real, so parameters and activations never get one), and a
value-dependent op whose value-carrying inputs have shadows
runs for real on them (float inputs, whose values do not decide the shape,
become zeros); its output becomes a fake tensor of the real shape. Where a
needed value has no shadow (e.g. a mask computed from activations), the op
still fails and is reported.

One kind of computed value gets a shadow all the same: the indices an op picks
from activations (`topk`, `argmax`, `max(dim=...)`: a mixture of experts' router
choosing experts for each token). They are spread evenly over the choices, as a
load-balancing loss aims for, so the tokens each expert gets (`torch.where(chosen
== e)`) have the sizes of a balanced router. Shadows made from them are
"invented": an op whose shape depends on one, and a read of one's value (`.item()`,
`.tolist()`: an all-to-all's split sizes), reports the pick's line.
"""

import enum
from collections.abc import Mapping

import torch

from . import compat

# Largest tensor (elements) that gets a real shadow: labels, ids and masks, not activations.
SHADOW_LIMIT = 1 << 20
# Largest random float draw that gets one: a draw the script branches on (LayerDrop's
# `torch.rand([]) < p` in wav2vec2 and HuBERT), not a weight or a noise tensor.
DRAW_SHADOW_LIMIT = 1024
_SHADOWED_DTYPES = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})


class Zeros(enum.Enum):
    """Which inputs without a followed value an op runs on as zeros."""

    NONE = enum.auto()
    FLOATS = enum.auto()  # a value-dependent op: its float inputs do not decide its shape
    ALL = enum.auto()  # an op whose values follow from its inputs' shapes alone


def flatten_tensors(value, into=None):
    """The tensors in `value` (nested lists, tuples and mappings' values), in order, appended
    to `into` (a new list by default)."""
    into = [] if into is None else into
    if isinstance(value, torch.Tensor):
        into.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            flatten_tensors(item, into)
    elif isinstance(value, (dict, Mapping)):  # a Hugging Face BatchEncoding is a UserDict
        for item in value.values():
            flatten_tensors(item, into)
    return into


def _shadowable(t):
    return t.dtype in _SHADOWED_DTYPES and t.numel() <= SHADOW_LIMIT


def _followed_float(func, t):
    """A small float output whose value is followed: of an op that neither draws random
    numbers nor leaves memory uninitialised (its value follows from its shadowed inputs
    alone), or a tiny random draw, drawn for real as the GPU run draws it."""
    if not t.dtype.is_floating_point or "empty" in func.__name__:
        return False
    if torch.Tag.nondeterministic_seeded in func.tags:
        return t.numel() <= DRAW_SHADOW_LIMIT
    return t.numel() <= SHADOW_LIMIT


# Ops whose values follow from their inputs' shapes and their scalars, not from the inputs'
# values: `torch.ones_like(audio, dtype=torch.long)`, a mask wav2vec2 sums into its
# frame counts, is followed though the audio is not.
_VALUES_FROM_SHAPES = frozenset(
    getattr(torch.ops.aten, name)
    for name in ("ones_like", "zeros_like", "full_like", "new_ones", "new_zeros", "new_full", "fill", "fill_",
                 "zero_")
    if hasattr(torch.ops.aten, name)
)

# Outputs (by position) a GPU run keeps on the host, which torch's C++ then reads directly,
# below the dispatcher: a packed sequence's batch sizes (`_pad_packed_sequence`, and
# `_pack_padded_sequence`'s backward, read them). They stay real CPU tensors.
_HOST_OUTPUTS = {torch.ops.aten._pack_padded_sequence.default: (1,)}

# Ops asking whether every value holds (`.all()`; torch.distributions' `torch._is_all_true`).
_ALL_TRUE_CHECKS = frozenset(
    getattr(torch.ops.aten, name) for name in ("all", "_is_all_true") if hasattr(torch.ops.aten, name)
)


# Collectives: run for real on the fake process group they move nothing, and leave work no
# one waits for; collectives.symmetric_values gives their results' values instead.
_COLLECTIVE_NAMESPACES = frozenset({"c10d", "_c10d_functional", "_c10d_functional_autograd", "_dtensor"})

# Ops that pick indices from their input's values (over a `dim`; max and min also have
# overloads without one, which pick none).
_INDEX_PICKS = frozenset(getattr(torch.ops.aten, name) for name in ("topk", "argmax", "argmin", "max", "min"))


def _even_picks(func, args, kwargs, out):
    """The indices `func` would pick, spread evenly over the choices: in row r of the
    picked dim, pick j is choice (r * k + j) mod choices. None for another op or a pick
    over the whole tensor (no dim)."""
    packet = func.overloadpacket
    if packet not in _INDEX_PICKS or not args:
        return None
    source = args[0]
    dim = compat.argument(func, args, kwargs, "dim")
    if not isinstance(dim, int) or source.dim() == 0:
        return None
    indices = flatten_tensors(out)[-1]  # topk and max/min(dim): (values, indices)
    if indices.dtype != torch.int64 or not _shadowable(indices):
        return None
    dim %= source.dim()
    choices = source.shape[dim]
    picks = indices.shape[dim] if indices.dim() > dim else 1
    with compat.real_execution():
        moved = list(indices.shape)
        if indices.dim() > dim:
            moved.append(moved.pop(dim))
        rows = indices.numel() // max(1, picks)
        even = torch.arange(rows * picks).reshape(rows, picks).remainder(choices).reshape(moved)
        if indices.dim() > dim:
            even = even.movedim(-1, dim)
        return indices, even.contiguous(), choices


class Shadows:
    """fake tensor -> real CPU tensor with the values it would have."""

    def __init__(self, site=lambda: ("", 0)):
        # Keyed by the TensorImpl address: C++ code may hand the same tensor back in a new
        # Python wrapper. The fake is held so the address stays unique during the trace.
        self._real = {}
        # Invented shadows (even picks, and what was computed from them): address ->
        # (file, line, choices) of the pick.
        self._invented = {}
        self._site = site  # (file, line) of the op running now

    def real(self, fake):
        entry = self._real.get(fake._cdata)
        return entry[1] if entry is not None else None

    def read(self, fake):
        """What a script reading `fake`'s values sees: the followed value, else zeros (as
        `.item()` of a value the trace does not compute reads)."""
        real = self.real(fake)
        if real is None:
            with compat.real_execution():
                real = torch.zeros(fake.shape, dtype=fake.dtype)
        return real

    def remember(self, fake, real, func=None):
        if _shadowable(fake) or (func is not None and _followed_float(func, fake)):
            self._real[fake._cdata] = (fake, real)

    def forget(self, fake):
        self._real.pop(fake._cdata, None)
        self._invented.pop(fake._cdata, None)

    def remember_derived(self, fake, real, func, sources):
        """Remembers `real` as the value of `func`'s output `fake`, computed from `sources`
        (invented when one of them is)."""
        self.remember(fake, real, func)
        self._invent(fake, self.invented_origin(sources))

    def only_invented(self, values):
        """Whether every value of `values` that is followed is invented: what an op computes
        from them depends on shapes alone."""
        return all(t._cdata in self._invented for t in flatten_tensors(values) if t._cdata in self._real)

    def _invent(self, fake, origin):
        """Marks a remembered shadow as made from the even pick at `origin` (None: not)."""
        if origin is not None and fake._cdata in self._real:  # held there: the address is its
            self._invented[fake._cdata] = origin

    def invented_origin(self, values):
        """(file, line, choices) of the even pick behind any of `values`' shadows, or None."""
        for t in flatten_tensors(values):
            origin = self._invented.get(t._cdata)
            if origin is not None:
                return origin
        return None

    def kept_values(self, fakes):
        """[(fake, a copy of its real value)] of those of `fakes` whose value is followed: for
        a later trace to restore (a kept model's small tensors, an optimizer's steps), as
        in-place ops change the followed values."""
        kept = []
        with compat.real_execution():
            for fake in fakes:
                real = self.real(fake)
                if real is not None:
                    kept.append((fake, real.clone()))
        return kept

    def restore(self, kept):
        """Gives each fake of `kept` (kept_values) the value it had then."""
        with compat.real_execution():
            for fake, real in kept:
                self._real[fake._cdata] = (fake, real.clone())

    def _to_real(self, value, zeros):
        if isinstance(value, torch.Tensor):
            real = self.real(value)
            if real is None and (zeros is Zeros.ALL or zeros is Zeros.FLOATS and value.dtype.is_floating_point):
                with compat.real_execution():
                    real = torch.zeros(value.shape, dtype=value.dtype)
            if real is None:
                raise LookupError
            return real
        if isinstance(value, (list, tuple)):
            return type(value)(self._to_real(v, zeros) for v in value)
        if torch.is_storage(value) and value.device.type == "meta":
            # torch.load under fake tensors reads no data: a loaded tensor's values are unknown.
            raise LookupError
        return value

    def _real_call(self, func, args, kwargs, zeros, fakes=None):
        try:
            real_args = self._to_real(args, zeros)
            real_kwargs = {k: self._to_real(v, zeros) for k, v in kwargs.items()}
        except LookupError:
            return None
        real_kwargs.pop("device", None)
        with compat.real_execution():
            try:
                return (func(*real_args, **real_kwargs),)
            except RuntimeError as error:
                if fakes is None or "not implemented for" not in str(error):
                    raise
                return (_in_float64(func, real_args, real_kwargs, [t.dtype for t in fakes]),)

    def follow(self, func, args, kwargs, out):
        """After a fake op ran: computes the real values of its small integer/bool outputs."""
        fakes = flatten_tensors(out)
        followed = (fakes and func.namespace not in _COLLECTIVE_NAMESPACES
                    and all(_shadowable(t) or _followed_float(func, t) for t in fakes))
        result = None
        if followed:
            # Integer and boolean outputs only: a float one (autograd's seed gradient) decides
            # no shape, and a shadow keeps its fake alive to the trace's end.
            from_shapes = func.overloadpacket in _VALUES_FROM_SHAPES and all(_shadowable(t) for t in fakes)
            result = self._real_call(func, args, kwargs, Zeros.ALL if from_shapes else Zeros.NONE, fakes=fakes)
        if result is None:
            for t in written_tensors(func, args, kwargs):  # an in-place op the shadows cannot follow
                self.forget(t)
                if t._base is not None:  # a write through a view changes what it views
                    self.forget(t._base)
            picked = _even_picks(func, args, kwargs, out)
            if picked is not None:
                fake, real, choices = picked
                self.remember(fake, real)
                self._invent(fake, (*self._site(), choices))
        else:
            origin = self.invented_origin((args, list(kwargs.values())))
            for fake, real in zip(fakes, flatten_tensors(result[0])):
                self.remember(fake, real, func)
                self._invent(fake, origin)
        if func.overloadpacket in _ALL_TRUE_CHECKS and isinstance(out, torch.Tensor) and self.real(out) is None:
            # An `.all()` of values not followed (`torch.isfinite(loss).all()`, a
            # distribution's argument check) reads as true: data as it should be.
            with compat.real_execution():
                self.remember(out, torch.ones(out.shape, dtype=torch.bool))

    def fallback(self, func, args, kwargs, fake_mode, zeros=Zeros.FLOATS):
        """Runs a value-dependent op for real, its inputs without followed values as
        `zeros` says; returns its fake-wrapped output, or None. The outputs that live on the
        host on a GPU too stay real (_HOST_OUTPUTS)."""
        result = self._real_call(func, args, kwargs, zeros)
        if result is None:
            return None
        real = result[0]
        if not isinstance(real, (torch.Tensor, list, tuple)):
            return real  # .item(): a Python number
        host = _HOST_OUTPUTS.get(func, ())
        fake = type(real)(r if i in host else _wrap(r, fake_mode) for i, r in enumerate(real)) \
            if isinstance(real, (list, tuple)) else _wrap(real, fake_mode)
        origin = self.invented_origin((args, list(kwargs.values())))
        for f, r in zip(flatten_tensors(fake), flatten_tensors(real)):
            if f is not r:
                self.remember(f, r)
                self._invent(f, origin)
        return fake


def _in_float64(func, args, kwargs, out_dtypes):
    """`func` on integer values the CPU has no kernel for in their dtype (a histc of int32
    expert ids, which transformers runs so on CUDA): computed in float64, exact for them,
    and given the outputs' dtypes."""

    def widened(value):
        if isinstance(value, torch.Tensor) and not value.is_floating_point() and value.dtype != torch.bool:
            return value.double()
        if isinstance(value, (list, tuple)):
            return type(value)(widened(v) for v in value)
        return value

    result = func(*widened(args), **{k: widened(v) for k, v in kwargs.items()})
    outputs = flatten_tensors(result)
    if len(outputs) != len(out_dtypes):
        raise RuntimeError(f"{func}: {len(outputs)} outputs in float64, {len(out_dtypes)} traced")
    cast = [o.to(dtype) for o, dtype in zip(outputs, out_dtypes)]
    return cast[0] if isinstance(result, torch.Tensor) else type(result)(cast)


def written_tensors(func, args, kwargs):
    """The tensors an op writes into (`x.index_put_(indices, v)` writes x, not the
    indices), by its schema's alias annotations."""
    written = []
    for index, argument in enumerate(func._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = args[index] if index < len(args) else kwargs.get(argument.name)
        flatten_tensors(value, written)
    return written


def _wrap(real, fake_mode):
    if isinstance(real, torch.Tensor):
        return fake_mode.from_tensor(real)
    return type(real)(_wrap(r, fake_mode) for r in real)
