"""Real-world models no one here wrote (Hugging Face transformers, timm), traced in shape mode.

Each script in this folder is a training script as users write it today (model moved
with .cuda() / .to("cuda"), AdamW, loss.backward(), optimizer.step(), zero_grad). Each
is traced once, as the worker would, in a subprocess (`python -m wavecast_tracer FILE
--batch-size N`), and the trace is checked for: success; no large op run for real on
the CPU; attention recorded as scaled-dot-product attention; parameter, gradient and
optimizer memory equal to the model's parameter count, computed here independently
(closed-form formulas from the config, and the model built on the meta device); and
per-line attribution of the script's own forward, backward and optimizer-step lines.

Needs torch 2.x with `transformers` and `timm` importable by this interpreter (else the
tests are skipped). No network: models are built from configs / by name with
pretrained=False, and the Hugging Face hub is switched off.

    PYTHONPATH=profiler/python python -m unittest discover -s tests/realworld -v

Environment: WAVECAST_REALWORLD_JOBS (traces run at once, default min(2, CPUs));
WAVECAST_REALWORLD_REQUIRED=1 (set by ctest) fails instead of skipping when a library is missing.
"""

import concurrent.futures
import importlib.util
import json
import os
import re
import resource
import subprocess
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
TRACER_PATH = os.path.join(REPO, "profiler", "python")
sys.path.insert(0, os.path.join(REPO, "tests", "python"))  # the tests' shared helpers

from source_lines import line_of  # noqa: E402
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
os.environ.update(OFFLINE)

try:
    import torch
    import timm
    import transformers

    MISSING = None if int(torch.__version__.split(".")[0]) >= 2 else f"torch {torch.__version__} is not 2.x"
except ImportError as exc:  # e.g. Debian's torch 1.13 without transformers/timm
    MISSING = (f"{exc.name or exc} is not installed in {sys.executable}: scripts/setup.sh test "
               "installs the test packages (scripts/python-env/test.lock)")

# Ops that may run for real on the CPU in shape mode: value-dependent ops on small integer /
# bool tensors (docs/trace-format.md "fallback_ops"). Anything bigger than the tracer's shadow
# limit (values.SHADOW_LIMIT, 2^20 elements) would be real work on activations.
TINY_ELEMENTS = 1 << 20

# A forward SDPA op as torch 2.x names its kernels (the public op, or the flash, memory-
# efficient or cuDNN kernel it picks); the backward one is the same name plus "backward".
SDPA = re.compile(r"scaled_dot_product|flash_attention|efficient_attention|cudnn_attention")


def known_tracer_bug(reason):
    """unittest.expectedFailure for a failure whose root cause is in the tracer, not in the
    script or the test (no marker when `reason` is None). `reason` says which bug (see
    README.md); remove the marker when the tracer is fixed (the test then reports an
    unexpected success, which fails the run)."""
    def mark(test):
        if not reason:
            return test
        test.__known_tracer_bug__ = reason
        return unittest.expectedFailure(test)
    return mark


# No tracer bug is open for these models: pass known_tracer_bug("why") to model_tests
# (sdpa_bug / kernel_bug) or put it on a test when one appears. Fixed ones seen while these
# tests were written (torch 2.11): model.cuda() on fake parameters ("_apply(): Couldn't
# swap"), optimizer.step() calling the real torch.cuda.is_current_stream_capturing, and
# SDPA recorded as the CPU's kernel or math decomposition instead of CUDA's.


def load_script(name):
    """The script as a module (for its config()), outside the tracer."""
    spec = importlib.util.spec_from_file_location(f"realworld_{name}", os.path.join(HERE, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def numel(meta):
    n = 1
    for d in meta["shape"]:
        n *= d
    return n


# --- tracing, one subprocess per script, at most JOBS at once ----------------------------
JOBS = int(os.environ.get("WAVECAST_REALWORLD_JOBS", min(2, os.cpu_count() or 1)))
_pool = None
_futures = {}
_children = set()
_lock = threading.Lock()


def _run_tracer(name, batch_size):
    script = os.path.join(HERE, name + ".py")
    env = dict(os.environ, **OFFLINE)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (TRACER_PATH, env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "wavecast_tracer", script, "--batch-size", str(batch_size)]
    with subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as child:
        with _lock:
            _children.add(child)
        try:
            out, err = child.communicate(timeout=600)
        finally:
            with _lock:
                _children.discard(child)
    try:
        document = json.loads(out)
    except ValueError:
        document = {"error": {"kind": "worker_crashed", "message": f"exit {child.returncode}: "
                              + err.decode(errors="replace")[-2000:]}}
    return document


def trace_of(name, batch_size):
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, JOBS))
        if name not in _futures:
            _futures[name] = _pool.submit(_run_tracer, name, batch_size)
        return _futures[name]


def tearDownModule():
    with _lock:
        for child in list(_children):  # prefetched traces no test waited for
            child.kill()
        pool = _pool
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


# --- the checks every model gets ---------------------------------------------------------
class RealWorldModel:
    """Mixin: NAME, BATCH, ATTENTION_LAYERS (0: no attention), FORWARD_LINES (texts of the
    iteration's forward lines, the model call first), LOSS_LINE (text, or None when the
    model computes the loss), STEP_LINE; parameter_count(); NEXT: the script to prefetch."""

    NAME = None
    BATCH = None
    ATTENTION_LAYERS = 0
    FORWARD_LINES = ()
    LOSS_LINE = None
    STEP_LINE = "optimizer.step()"
    NEXT = None

    @classmethod
    def setUpClass(cls):
        if MISSING:
            # ctest runs these with the project's environment, where a missing library is an
            # installation bug, not a reason to skip.
            if os.environ.get("WAVECAST_REALWORLD_REQUIRED"):
                raise AssertionError(MISSING)
            raise unittest.SkipTest(MISSING)
        cls.path = os.path.join(HERE, cls.NAME + ".py")
        cls.script = load_script(cls.NAME)
        future = trace_of(cls.NAME, cls.BATCH)
        if cls.NEXT is not None:  # traced meanwhile, on the other core
            trace_of(*cls.NEXT)
        cls.trace = future.result()
        cls.meta_params = cls.meta_parameters()

    @classmethod
    def meta_parameters(cls):
        """The model's parameters (shapes only), built on the meta device here."""
        with torch.device("meta"):
            model = cls.build()
        return list(model.parameters())  # shared (tied) parameters once, as torch lists them

    def ops(self):
        if "error" in self.trace:
            self.fail(f"{self.NAME} did not trace: {self.trace['error'].get('message')}")
        return self.trace["ops"]

    def param_count(self):
        return sum(p.numel() for p in self.meta_params)

    # -- the tests -----------------------------------------------------------------------
    def check_trace_succeeds(self):
        self.assertNotIn("error", self.trace, json.dumps(self.trace.get("error"), indent=1)[:3000])
        self.assertEqual(self.trace["mode"], "shape")
        self.assertEqual(self.trace["batch_size"], self.BATCH)
        self.assertEqual(self.trace["entry_file"], self.path)
        self.assertGreater(len(self.trace["ops"]), 100)
        phases = {op["phase"] for op in self.trace["ops"]}
        self.assertEqual(phases, {"forward", "backward", "optimizer"})

    def check_no_large_fallback(self):
        """Shape-only, except value-dependent ops on tiny integer/bool tensors (labels, masks):
        those run for real by design and cost nothing on a GPU worth predicting."""
        ops = self.ops()
        fallen = [op for op in ops if op["fallback"]]
        self.assertEqual(set(self.trace["fallback_ops"]), {op["name"] for op in fallen})
        for op in fallen:
            for meta in op["inputs"] + op["outputs"]:
                if meta is not None:
                    self.assertLessEqual(numel(meta), TINY_ELEMENTS, op)
                    self.assertNotIn(meta["dtype"], ("float32", "float16", "bfloat16"), op)

    def attention_ops(self, backward):
        return [op for op in self.ops() if SDPA.search(op["name"])
                and ("backward" in op["name"]) == backward]

    def check_attention_is_sdpa(self):
        forward = self.attention_ops(backward=False)
        self.assertEqual(len(forward), self.ATTENTION_LAYERS, sorted({op["name"] for op in forward}))
        self.assertEqual({op["phase"] for op in forward}, {"forward"})
        backward = self.attention_ops(backward=True)
        self.assertEqual(len(backward), self.ATTENTION_LAYERS)
        self.assertEqual({op["phase"] for op in backward}, {"backward"})
        # The attention's softmax (over batch x heads x L x S scores) is inside the SDPA
        # kernel, not a separate op; a mixture of experts' router has one over (tokens, experts).
        softmax = [op for op in self.ops() if "softmax" in op["name"] and "log_softmax" not in op["name"]
                   and len(op["inputs"][0]["shape"]) > 2]
        self.assertEqual(softmax, [])

    def check_attention_is_a_cuda_kernel(self):
        names = {op["name"] for op in self.attention_ops(False) + self.attention_ops(True)}
        self.assertTrue(names)
        self.assertEqual({n for n in names if "cpu" in n}, set())

    def check_memory(self):
        ops = self.ops()
        self.assertTrue(ops)
        memory = self.trace["memory"]
        params = self.param_count()
        self.assertEqual(memory["parameters_bytes"], 4 * params)  # float32
        self.assertEqual(memory["gradients_bytes"], 4 * params)  # every parameter is trained
        # AdamW keeps exp_avg and exp_avg_sq per parameter (2 x the parameters), plus a
        # 0-dim float32 `step` tensor per parameter tensor, which optimizer.state holds and
        # the trace counts too (on a GPU it is host memory unless fused/capturable).
        steps = 4 * len(self.meta_params)
        self.assertEqual(memory["optimizer_state_bytes"], 2 * 4 * params + steps)

    def check_lines(self):
        ops = self.ops()
        path = self.path
        for op in ops:  # every op is credited to the user's own script, never to a library
            self.assertEqual(op["loc"]["file"], path, op)
        forward_lines = {line_of(path, text) for text in self.FORWARD_LINES}
        model_line = line_of(path, self.FORWARD_LINES[0])
        by_phase = {"forward": set(), "backward": set(), "optimizer": set()}
        counts = {}
        for op in ops:
            by_phase[op["phase"]].add(op["loc"]["line"])
            key = (op["phase"], op["loc"]["line"])
            counts[key] = counts.get(key, 0) + 1
        self.assertEqual(by_phase["forward"], forward_lines)
        # Backward work is credited to the forward line that made it (trace-format.md).
        backward_lines = {model_line} | ({line_of(path, self.LOSS_LINE)} if self.LOSS_LINE else set())
        self.assertEqual(by_phase["backward"], backward_lines)
        self.assertGreater(counts[("backward", model_line)], 50)
        for op in ops:
            if op["phase"] == "backward" and "forward_id" in op:
                forward = ops[op["forward_id"]]
                self.assertEqual(forward["phase"], "forward")
                self.assertEqual(op["loc"], forward["loc"])
        # The model call's ops were entered through the model (the module path is recorded).
        self.assertTrue(any(op["module"] for op in ops if op["loc"]["line"] == model_line))
        step_line = line_of(path, self.STEP_LINE)
        self.assertEqual(by_phase["optimizer"], {step_line})
        self.assertGreater(counts[("optimizer", step_line)], len(self.meta_params))
        # zero_grad() sets gradients to None: nothing to launch on its line.
        zero_grad = line_of(path, "zero_grad(")
        self.assertNotIn(zero_grad, by_phase["forward"] | by_phase["backward"] | by_phase["optimizer"])


def model_tests(attention=False, sdpa_bug=None, kernel_bug=None):
    """The test methods of one model class. attention: the model has attention layers;
    sdpa_bug / kernel_bug: the tracer bug that keeps its attention from being recorded as
    SDPA / as the kernel CUDA runs (None: no such bug)."""

    def reason(*bugs):
        return "; ".join(b for b in bugs if b) or None

    class Tests(RealWorldModel):
        @known_tracer_bug(reason())
        def test_trace_succeeds(self):
            self.check_trace_succeeds()

        @known_tracer_bug(reason())
        def test_no_large_op_fell_back_to_the_cpu(self):
            self.check_no_large_fallback()

        @known_tracer_bug(reason())
        def test_parameter_gradient_and_adamw_memory(self):
            self.check_memory()

        @known_tracer_bug(reason())
        def test_lines_forward_backward_and_step(self):
            self.check_lines()

    if attention:
        @known_tracer_bug(reason(sdpa_bug))
        def test_attention_is_sdpa(self):
            self.check_attention_is_sdpa()

        @known_tracer_bug(reason(sdpa_bug or kernel_bug))
        def test_attention_is_the_kernel_cuda_runs(self):
            self.check_attention_is_a_cuda_kernel()

        Tests.test_attention_is_sdpa = test_attention_is_sdpa
        Tests.test_attention_is_the_kernel_cuda_runs = test_attention_is_the_kernel_cuda_runs
    return Tests


# --- the models ----------------------------------------------------------------------------
# Parameter counts, closed form from the configs (cross-checked with the meta-device build).
def gpt2_parameters(c):
    d = c.n_embd  # token + position embeddings; per block: qkv, proj, 2 MLP linears, 2 norms;
    return c.vocab_size * d + c.n_positions * d + c.n_layer * (12 * d * d + 13 * d) + 2 * d  # lm_head tied


def bert_mlm_parameters(c):
    d, i = c.hidden_size, c.intermediate_size
    embeddings = (c.vocab_size + c.max_position_embeddings + c.type_vocab_size) * d + 2 * d
    layer = 4 * (d * d + d) + 2 * d + (d * i + i) + (i * d + d) + 2 * d
    head = d * d + d + 2 * d + c.vocab_size  # transform + norm + decoder bias (weight tied)
    return embeddings + c.num_hidden_layers * layer + head


def llama_parameters(c):
    d, i = c.hidden_size, c.intermediate_size
    kv = c.num_key_value_heads * (d // c.num_attention_heads)
    layer = 2 * d * d + 2 * d * kv + 3 * d * i + 2 * d  # q, o, k, v, gate/up/down, 2 RMSNorms
    return 2 * c.vocab_size * d + c.num_hidden_layers * layer + d  # embed + untied lm_head + norm


def mixtral_parameters(c):
    d, i, e = c.hidden_size, c.intermediate_size, c.num_local_experts
    kv = c.num_key_value_heads * (d // c.num_attention_heads)
    # q, o, k, v; the router (one logit per expert); each expert's gate, up and down; 2 RMSNorms
    layer = 2 * d * d + 2 * d * kv + d * e + e * 3 * d * i + 2 * d
    return 2 * c.vocab_size * d + c.num_hidden_layers * layer + d  # embed + untied lm_head + norm


def deepseek_v3_parameters(c):
    d, h = c.hidden_size, c.num_attention_heads
    qk = c.qk_nope_head_dim + c.qk_rope_head_dim
    attention = (d * c.q_lora_rank + c.q_lora_rank + c.q_lora_rank * h * qk  # low-rank query, its norm
                 + d * (c.kv_lora_rank + c.qk_rope_head_dim) + c.kv_lora_rank  # joint key/value, its norm
                 + c.kv_lora_rank * h * (c.qk_nope_head_dim + c.v_head_dim)  # keys and values from it
                 + h * c.v_head_dim * d)  # output
    dense = 3 * d * c.intermediate_size
    routed, shared = c.n_routed_experts, c.n_shared_experts * c.moe_intermediate_size
    moe = d * routed + routed * 3 * d * c.moe_intermediate_size + 3 * d * shared  # router, experts, shared
    layers = c.num_hidden_layers
    blocks = layers * (attention + 2 * d) + c.first_k_dense_replace * dense + (layers - c.first_k_dense_replace) * moe
    return 2 * c.vocab_size * d + blocks + d  # embed + untied lm_head + final norm


class HuggingFace:
    MODEL_CLASS = None
    FORMULA = None

    @classmethod
    def build(cls):
        return getattr(transformers, cls.MODEL_CLASS)(cls.script.config())

    @property
    def ATTENTION_LAYERS(self):  # noqa: N802 - one attention per layer
        return self.script.config().num_hidden_layers

    def test_parameter_count_formula(self):
        """The independent count: the closed form agrees with the meta-device build."""
        config = self.script.config()
        self.assertEqual(config._attn_implementation, "sdpa")
        self.assertEqual(type(self).FORMULA(config), self.param_count())


class Gpt2(HuggingFace, model_tests(attention=True), unittest.TestCase):
    NAME, BATCH = "gpt2_hf", 8
    MODEL_CLASS, FORMULA = "GPT2LMHeadModel", gpt2_parameters
    FORWARD_LINES = ("outputs = model(input_ids=input_ids, labels=input_ids)",)
    NEXT = ("bert_hf", 16)


class Bert(HuggingFace, model_tests(attention=True), unittest.TestCase):
    NAME, BATCH = "bert_hf", 16
    MODEL_CLASS, FORMULA = "BertForMaskedLM", bert_mlm_parameters
    FORWARD_LINES = ("outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)",)
    NEXT = ("llama_hf", 4)


class Llama(HuggingFace, model_tests(attention=True), unittest.TestCase):
    NAME, BATCH = "llama_hf", 4
    MODEL_CLASS, FORMULA = "LlamaForCausalLM", llama_parameters
    FORWARD_LINES = ("logits = model(input_ids=inputs).logits",
                     "inputs, targets = tokens[:, :-1], tokens[:, 1:]",
                     "loss = F.cross_entropy(")
    LOSS_LINE = "loss = F.cross_entropy("
    NEXT = ("mixtral_hf", 2)

    def test_bfloat16_autocast_and_flash_attention(self):
        """Under bf16 autocast the projections run in bf16 and GQA attention as flash."""
        forward = [op for op in self.ops() if op["phase"] == "forward"]
        self.assertEqual({op["outputs"][0]["dtype"] for op in forward if op["name"] == "aten::mm"},
                         {"bfloat16"})
        self.assertEqual({op["name"] for op in self.attention_ops(False)},
                         {"aten::_scaled_dot_product_flash_attention"})
        self.assertEqual({op["name"] for op in self.attention_ops(True)},
                         {"aten::_scaled_dot_product_flash_attention_backward"})


class Mixtral(HuggingFace, model_tests(attention=True), unittest.TestCase):
    """A mixture of experts: transformers runs each layer's experts as grouped GEMMs, whose
    shape-only kernel refuses the float32 CUDA runs them in (wavecast_tracer/cuda_kernels.py)."""

    NAME, BATCH = "mixtral_hf", 2
    MODEL_CLASS, FORMULA = "MixtralForCausalLM", mixtral_parameters
    FORWARD_LINES = ("outputs = model(input_ids=input_ids, labels=input_ids)",)
    NEXT = ("deepseek_v3_hf", 2)

    def test_experts_run_as_grouped_gemms(self):
        config = self.script.config()
        d, i, e = config.hidden_size, config.intermediate_size, config.num_local_experts
        rows = self.BATCH * self.script.SEQ_LEN * config.num_experts_per_tok  # (token, expert) pairs
        grouped = [op for op in self.ops() if op["name"] == "aten::_grouped_mm"]
        forward = [op for op in grouped if op["phase"] == "forward"]
        backward = [op for op in grouped if op["phase"] == "backward"]
        self.assertEqual(len(forward), 2 * config.num_hidden_layers)  # gate/up, then down
        self.assertEqual(len(backward), 4 * config.num_hidden_layers)  # input and weight gradients
        # Autocast does not cast grouped GEMMs: they run in the weights' float32.
        self.assertEqual({op["outputs"][0]["dtype"] for op in grouped}, {"float32"})
        shapes = [(op["inputs"][0]["shape"], op["inputs"][1]["shape"], op["outputs"][0]["shape"])
                  for op in forward[:2]]
        self.assertEqual(shapes, [([rows, d], [e, d, 2 * i], [rows, 2 * i]),
                                  ([rows, i], [e, i, d], [rows, d])])
        self.assertEqual({op["inputs"][2]["shape"][0] for op in grouped}, {e})  # one offset per expert
        weight_gradients = [op["outputs"][0]["shape"] for op in backward if len(op["outputs"][0]["shape"]) == 3]
        self.assertEqual(sorted(weight_gradients)[:2], [[e, d, i], [e, d, i]])


class DeepseekV3(HuggingFace, model_tests(attention=True), unittest.TestCase):
    """Latent attention (query and key head sizes differ from the values': the memory-
    efficient kernel, not flash) and routed experts picked within expert groups."""

    NAME, BATCH = "deepseek_v3_hf", 2
    MODEL_CLASS, FORMULA = "DeepseekV3ForCausalLM", deepseek_v3_parameters
    FORWARD_LINES = ("outputs = model(input_ids=input_ids, labels=input_ids)",)
    NEXT = ("wav2vec2_hf", 8)

    def test_routed_experts_run_as_grouped_gemms_beside_the_shared_expert(self):
        config = self.script.config()
        moe_layers = config.num_hidden_layers - config.first_k_dense_replace
        rows = self.BATCH * self.script.SEQ_LEN * config.num_experts_per_tok
        grouped = [op for op in self.ops() if op["name"] == "aten::_grouped_mm" and op["phase"] == "forward"]
        self.assertEqual(len(grouped), 2 * moe_layers)
        self.assertEqual({tuple(op["inputs"][0]["shape"][:1]) for op in grouped}, {(rows,)})
        self.assertEqual(grouped[0]["inputs"][1]["shape"],
                         [config.n_routed_experts, config.hidden_size, 2 * config.moe_intermediate_size])
        shared = [op for op in self.ops() if op["phase"] == "forward" and op["name"] == "aten::mm"
                  and op["module"] == "model.layers.1.mlp.shared_experts.gate_proj"]
        self.assertEqual(len(shared), 1)
        self.assertEqual({op["name"] for op in self.attention_ops(False)},
                         {"aten::_scaled_dot_product_efficient_attention"})


def wav2vec2_parameters(c):
    d, i = c.hidden_size, c.intermediate_size
    channels = list(c.conv_dim)
    encoder = sum(c_in * c_out * k for c_in, c_out, k in zip([1] + channels[:-1], channels, c.conv_kernel))
    encoder += 2 * channels[0]  # the first conv's group norm (the "group" feature extractor)
    projection = 2 * channels[-1] + channels[-1] * d + d  # its layer norm and linear
    taps = c.num_conv_pos_embeddings  # the positional conv, weight-normed: g, v and a bias
    position = taps + d * (d // c.num_conv_pos_embedding_groups) * taps + d
    masked = d if c.mask_time_prob > 0 or c.mask_feature_prob > 0 else 0  # SpecAugment's embedding
    layer = 4 * (d * d + d) + 2 * d + (d * i + i) + (i * d + d) + 2 * d
    return encoder + projection + masked + position + 2 * d + c.num_hidden_layers * layer + d * c.vocab_size + c.vocab_size


class Wav2Vec2(HuggingFace, model_tests(attention=True), unittest.TestCase):
    """Speech: a convolutional encoder over raw audio, LayerDrop (each layer skipped when a
    draw on the host falls under 0.1), SpecAugment's masks and a CTC loss, whose output
    shapes follow the label and audio lengths."""

    NAME, BATCH = "wav2vec2_hf", 8
    MODEL_CLASS, FORMULA = "Wav2Vec2ForCTC", wav2vec2_parameters
    FORWARD_LINES = ("outputs = model(input_values=audio, labels=labels)",)
    NEXT = ("llama7b_hf", 8)

    def kept_layers(self):
        return sorted({int(op["module"].split(".")[3]) for op in self.ops()
                       if op["phase"] == "forward" and op["module"].startswith("wav2vec2.encoder.layers.")})

    @property
    def ATTENTION_LAYERS(self):  # noqa: N802 - the layers LayerDrop kept
        return len(self.kept_layers())

    def test_layer_drop_draws_on_the_host_and_keeps_most_layers(self):
        layers = self.script.config().num_hidden_layers
        draws = [op for op in self.ops() if op["name"] == "aten::rand"]
        self.assertEqual(len(draws), layers)
        self.assertEqual({tuple(op["outputs"][0]["shape"]) for op in draws}, {()})
        # The same seed on every trace: the same layers every time (here 10 of 12).
        self.assertTrue(layers - 3 <= len(self.kept_layers()) <= layers, self.kept_layers())

    def test_ctc_loss_runs_on_the_lengths_and_labels(self):
        frames = 199  # 4 s of 16 kHz audio through the feature encoder's strides (320)
        (loss,) = [op for op in self.ops() if op["name"] == "aten::_ctc_loss"]
        self.assertEqual(loss["inputs"][0]["shape"], [frames, self.BATCH, self.script.VOCABULARY])
        self.assertEqual(loss["inputs"][1]["shape"], [self.BATCH * self.script.LABEL_LENGTH])
        # log_alpha: a row per frame and per label position with blanks between (2 L + 1).
        self.assertEqual(loss["outputs"][1]["shape"], [self.BATCH, frames, 2 * self.script.LABEL_LENGTH + 1])
        self.assertEqual(sum(op["name"] == "aten::_ctc_loss_backward" for op in self.ops()), 1)

    def check_memory(self):
        """AdamW's state is made at a parameter's first update: a layer LayerDrop skipped in
        both traced iterations has none yet (a real run makes it at the first iteration
        that keeps the layer), so the state is short by whole layers, never by parts."""
        memory = self.trace["memory"]
        params = self.param_count()
        self.assertEqual(memory["parameters_bytes"], 4 * params)
        self.assertEqual(memory["gradients_bytes"], 4 * params)
        full = 2 * 4 * params + 4 * len(self.meta_params)
        c = self.script.config()
        d, i = c.hidden_size, c.intermediate_size
        layer_params = 4 * (d * d + d) + 2 * d + (d * i + i) + (i * d + d) + 2 * d
        layer_state = 2 * 4 * layer_params + 4 * 16  # 16 tensors, each with a `step`
        missing, remainder = divmod(full - memory["optimizer_state_bytes"], layer_state)
        self.assertEqual(remainder, 0)
        self.assertLessEqual(missing, c.num_hidden_layers - len(self.kept_layers()))

    def check_no_large_fallback(self):
        """Value-dependent ops run on the CPU: on masks and lengths, and on float inputs
        turned to zeros (the CTC loss's log-probabilities, SpecAugment's masked frames),
        never over 2^21 elements."""
        ops = self.ops()
        fallen = [op for op in ops if op["fallback"]]
        self.assertEqual(set(self.trace["fallback_ops"]), {op["name"] for op in fallen})
        self.assertEqual(set(self.trace["fallback_ops"]), {"aten::_local_scalar_dense", "aten::masked_select",
                                                          "aten::_ctc_loss", "aten::_ctc_loss_backward",
                                                          "aten::index"})
        for op in fallen:
            for meta in op["inputs"] + op["outputs"]:
                if meta is not None:
                    self.assertLessEqual(numel(meta), 2 * TINY_ELEMENTS, op)


class Llama7B(HuggingFace, model_tests(attention=True), unittest.TestCase):
    """Llama-2-7B's shapes at batch 8 x 2048 tokens: ~108 GB of parameters, gradients and
    AdamW state in float32, traced on a machine with a fraction of that."""

    NAME, BATCH = "llama7b_hf", 8
    MODEL_CLASS, FORMULA = "LlamaForCausalLM", llama_parameters
    FORWARD_LINES = ("outputs = model(input_ids=input_ids, labels=input_ids)",)
    NEXT = ("vit_timm", 32)

    def test_parameter_count_is_llama2_7b(self):
        self.assertEqual(self.param_count(), 6_738_415_616)

    def test_traced_without_the_memory(self):
        ops = self.ops()
        memory = self.trace["memory"]
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        needed = memory["parameters_bytes"] + memory["gradients_bytes"] + memory["optimizer_state_bytes"]
        self.assertGreater(needed, 100 * 10**9)
        self.assertGreater(needed, physical)
        self.assertGreaterEqual(memory["peak_live_bytes"], needed)
        # The tracer process itself stayed small (max resident set of any child, in KiB).
        self.assertLess(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, 8 * 2**30)
        embedding = next(op for op in ops if op["name"] == "aten::embedding")
        self.assertEqual(embedding["inputs"][1]["shape"], [8, 2048])
        self.assertEqual(embedding["outputs"][0]["shape"], [8, 2048, 4096])
        mlp = [op for op in ops if op["name"] == "aten::mm" and op["phase"] == "forward"
               and op["outputs"][0]["shape"] == [8 * 2048, 11008]]
        self.assertEqual(len(mlp), 2 * 32)  # gate and up projections


class TimmModel:
    TIMM_NAME = None

    @classmethod
    def timm_args(cls):
        return {}

    @classmethod
    def build(cls):
        return timm.create_model(cls.TIMM_NAME, pretrained=False, num_classes=1000, **cls.timm_args())


class ViT(TimmModel, model_tests(attention=True), unittest.TestCase):
    NAME, BATCH = "vit_timm", 32
    TIMM_NAME = "vit_base_patch16_224"
    FORWARD_LINES = ("outputs = model(images)", "loss = criterion(outputs, targets)")
    LOSS_LINE = "loss = criterion(outputs, targets)"
    NEXT = ("convnext_timm", 32)

    @classmethod
    def timm_args(cls):
        return {"depth": cls.script.DEPTH}

    @property
    def ATTENTION_LAYERS(self):  # noqa: N802
        return self.script.DEPTH

    def test_parameter_count_formula(self):
        if self.script.DEPTH == 12:
            self.assertEqual(self.param_count(), 86_567_656)  # as published for ViT-B/16
        d, patches, depth = 768, (224 // 16) ** 2, self.script.DEPTH
        embed = 3 * 16 * 16 * d + d + d + (patches + 1) * d  # patch conv, class token, positions
        blocks = depth * (12 * d * d + 13 * d)
        self.assertEqual(embed + blocks + 2 * d + d * 1000 + 1000, self.param_count())


class ConvNeXt(TimmModel, model_tests(), unittest.TestCase):
    NAME, BATCH = "convnext_timm", 32
    TIMM_NAME = "convnext_tiny"
    FORWARD_LINES = ("outputs = model(images)", "loss = criterion(outputs, targets)")
    LOSS_LINE = "loss = criterion(outputs, targets)"
    NEXT = ("resnet_timm", 64)

    def test_parameter_count_is_convnext_tiny(self):
        self.assertEqual(self.param_count(), 28_589_128)  # as published for ConvNeXt-T

    def test_channels_last(self):
        convs = [op for op in self.ops() if op["name"] == "aten::convolution"]
        self.assertEqual(len(convs), 4 + 18)  # stem, 3 downsamples, 18 depthwise convs
        self.assertEqual(convs[0]["inputs"][0]["shape"], [32, 3, 224, 224])
        # channels_last input: not contiguous in the default (NCHW) format.
        self.assertFalse(convs[0]["inputs"][0]["contiguous"])


class ResNet(TimmModel, model_tests(), unittest.TestCase):
    NAME, BATCH = "resnet_timm", 64
    TIMM_NAME = "resnet50"
    FORWARD_LINES = ("logits = model(images)", "loss = F.cross_entropy(logits, targets)")
    LOSS_LINE = "loss = F.cross_entropy(logits, targets)"

    def test_parameter_count_is_resnet50(self):
        self.assertEqual(self.param_count(), 25_557_032)  # torchvision's / timm's ResNet-50

    def test_convolutions(self):
        self.assertEqual(sum(op["name"] == "aten::convolution" for op in self.ops()), 53)
        self.assertEqual(sum(op["name"] == "aten::convolution_backward" for op in self.ops()), 53)


if __name__ == "__main__":
    unittest.main()
