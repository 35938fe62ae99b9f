"""Hugging Face transformers models, built from their configs, traced in shape mode and
checked as model_checks.py says."""

import os
import resource
import unittest

from model_checks import TINY_ELEMENTS, model_tests, numel, stop_tracing, transformers


def tearDownModule():
    stop_tracing()


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
