"""Scripts that use torch.distributed trace as rank 0 of a torchrun launch under torch's
fake process group: each sample under samples/distributed/ and its collectives, their
bytes computed by hand from the models' parameter sizes."""

import os
import tempfile
import textwrap
import unittest

from scripts_test_sandbox import TRAIN  # two optimizer steps of a small model
from source_lines import line_of
from wavecast_tracer import distributed
from wavecast_tracer.errors import TraceError
from wavecast_tracer.tracer import run_trace

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLES = os.path.abspath(os.environ.get(
    "WAVECAST_SAMPLES_DIR", os.path.join(HERE, "..", "..", "samples")
))
DISTRIBUTED = os.path.join(SAMPLES, "distributed")
FIXTURES = os.path.join(HERE, "fixtures")
CALLS = os.path.join(FIXTURES, "distributed_calls.py")
FLOAT = 4


def sample(name):
    return os.path.join(DISTRIBUTED, name)


def linear_bytes(inputs, outputs):
    return (inputs * outputs + outputs) * FLOAT


def collectives(trace, phase=None):
    return [op for op in trace["ops"]
            if "collective" in op["args"] and (phase is None or op["phase"] == phase)]


def op_by_id(trace, op_id):
    op = trace["ops"][op_id]
    assert op["id"] == op_id
    return op


HAS_FAKE_PROCESS_GROUP = distributed._available()
NO_FAKE_PROCESS_GROUP = "this torch has no fake process group (torch.testing._internal.distributed.fake_pg)"


@unittest.skipUnless(HAS_FAKE_PROCESS_GROUP, NO_FAKE_PROCESS_GROUP)
class DistributedSamples(unittest.TestCase):
    def assert_collective(self, op, kind, size, group="default", group_size=8):
        self.assertEqual(op["args"]["collective"], kind, op)
        self.assertEqual(op["args"]["bytes"], size, op)
        self.assertEqual(op["args"]["group"], group, op)
        self.assertEqual(op["args"]["group_size"], group_size, op)

    def assert_waits_later(self, trace, op):
        """An async collective's wait point is a later op."""
        self.assertTrue(op["args"]["async"], op)
        self.assertGreater(op["args"]["wait_op"], op["id"])

    def test_ddp_all_reduces_its_gradient_buckets_during_backward(self):
        path = sample("ddp.py")
        trace = run_trace(path, batch_size=4)
        self.assertEqual(trace["distributed"], {
            "world_size": 8, "rank": 0, "local_world_size": 8, "backend": "fake",
            "groups": [{"name": "default", "size": 8}],
        })
        head, fc3 = linear_bytes(1024, 10), linear_bytes(1024, 1024)
        fc2, fc1 = linear_bytes(1024, 1024), linear_bytes(512, 1024)
        ops = collectives(trace)
        self.assertEqual([op["name"] for op in ops], ["c10d::allreduce_"] * 2)
        self.assertEqual({op["phase"] for op in ops}, {"backward"})
        # Buckets fill in the order gradients become ready (head first); the first closes
        # once it holds 1 MiB (DDP's _DEFAULT_FIRST_BUCKET_BYTES), the rest hold 25 MiB.
        self.assert_collective(ops[0], "all_reduce", head + fc3)
        self.assert_collective(ops[1], "all_reduce", fc2 + fc1)
        self.assertNotIn("side_stream", ops[0]["args"])  # on NCCL's stream, after the compute
        self.assertEqual(sum(op["args"]["bytes"] for op in ops), trace["memory"]["gradients_bytes"])
        # Each is credited to the layer whose gradient completed its bucket.
        self.assertEqual(ops[0]["loc"]["line"], line_of(path, "self.fc3(x)"))
        self.assertEqual(ops[1]["loc"]["line"], line_of(path, "self.fc1(x)"))
        for op in ops:
            self.assert_waits_later(trace, op)
            # DDP waits for its buckets at the end of backward, where it copies them into .grad.
            waiter = op_by_id(trace, op["args"]["wait_op"])
            self.assertEqual((waiter["name"], waiter["phase"]), ("aten::copy_", "backward"))
        self.assertLess(ops[0]["args"]["wait_op"], ops[1]["args"]["wait_op"])

    def test_fsdp2_gathers_parameters_and_scatters_gradients_per_module(self):
        path = sample("fsdp2.py")
        trace = run_trace(path, batch_size=4)
        block = linear_bytes(256, 1024) + linear_bytes(1024, 256)
        # The root holds embed and head; FSDP2 pads each parameter's first dimension to a
        # multiple of the 8 ranks: head's 10 rows and 10 biases become 16.
        root = linear_bytes(64, 256) + (16 * 256 + 16) * FLOAT
        gathers = [op for op in collectives(trace) if op["args"]["collective"] == "all_gather"]
        scatters = [op for op in collectives(trace) if op["args"]["collective"] == "reduce_scatter"]
        self.assertEqual([(op["phase"], op["args"]["bytes"]) for op in gathers],
                         [("forward", root), ("forward", block), ("forward", block),
                          ("backward", block), ("backward", block)])
        self.assertEqual([(op["phase"], op["args"]["bytes"]) for op in scatters],
                         [("backward", block), ("backward", block), ("backward", root)])
        self.assertEqual({op["name"] for op in gathers}, {"c10d::_allgather_base_"})
        self.assertEqual({op["name"] for op in scatters}, {"c10d::_reduce_scatter_base_"})
        for op in gathers + scatters:
            self.assert_collective(op, op["args"]["collective"], op["args"]["bytes"])
            self.assert_waits_later(trace, op)  # on FSDP's own streams
            self.assertIs(op["args"].get("side_stream"), True)
        # Forward: the root's gather at the model's call, each block's at its call; each waited
        # for where its output is copied into the parameters.
        self.assertEqual([op["loc"]["line"] for op in gathers[:3]],
                         [line_of(path, "model(images)")] + [line_of(path, "x = block(x)")] * 2)
        self.assertEqual([op["module"] for op in gathers[1:3]], ["blocks.0", "blocks.1"])
        for op in gathers[:3]:
            self.assertEqual(op_by_id(trace, op["args"]["wait_op"])["name"], "fsdp::split_with_sizes_copy")
        # Each rank keeps an eighth of every (padded) parameter.
        self.assertEqual(trace["memory"]["parameters_bytes"], (root + 2 * block) // 8)

    def test_tensor_parallel_all_reduces_row_parallel_outputs(self):
        path = sample("tensor_parallel.py")
        trace = run_trace(path, batch_size=2)
        self.assertEqual(trace["distributed"]["groups"],
                         [{"name": "default", "size": 8}, {"name": "tp", "size": 8}])
        activation = 2 * 128 * 256 * FLOAT  # batch x sequence x dim
        forward, backward = collectives(trace, "forward"), collectives(trace, "backward")
        self.assertEqual([op["name"] for op in forward], ["_c10d_functional::all_reduce"] * 2)
        for op in forward + backward:
            self.assert_collective(op, "all_reduce", activation, group="tp")
            self.assertEqual(op["loc"]["line"], line_of(path, "return x + self.down"))
            # The compute stream waits at once: the next op is its wait_tensor.
            self.assertFalse(op["args"]["async"])
            waiter = op_by_id(trace, op["args"]["wait_op"])
            self.assertEqual((waiter["id"], waiter["name"]), (op["id"] + 1, "_c10d_functional::wait_tensor"))
        self.assertEqual([op["module"] for op in forward], ["blocks.0", "blocks.1"])
        # Backward: the second block's input gradient (the first block's input needs none).
        self.assertEqual(len(backward), 1)
        # The ops are the rank's: the column-parallel Linear makes 1024 / 8 features.
        ups = [op for op in trace["ops"] if op["name"] == "aten::addmm" and op["module"] == "blocks.0.up"]
        self.assertEqual([op["outputs"][0]["shape"] for op in ups], [[256, 128]])
        for op in trace["ops"]:
            if op["phase"] == "backward" and op["name"] != "aten::ones_like":
                self.assertIn("forward_id", op)
        local_block = linear_bytes(256, 1024) // 8 + (1024 * 256 // 8 + 256) * FLOAT
        self.assertEqual(trace["memory"]["parameters_bytes"], 2 * local_block)

    def test_expert_parallel_exchanges_counts_then_tokens_as_a_balanced_router_would(self):
        path = sample("expert_parallel.py")
        trace = run_trace(path, batch_size=8)
        tokens = 8 * 256 * 2  # batch x sequence x experts per token: (token, expert) pairs
        routed = tokens * 512 * FLOAT  # as many arrive at this rank's 2 experts as it sends out
        forward, backward = collectives(trace, "forward"), collectives(trace, "backward")
        self.assertEqual([op["args"]["bytes"] for op in forward], [16 * FLOAT, routed, routed] * 2)
        # Backward sends both gradients back, but the first block's tokens are the batch,
        # which needs none.
        self.assertEqual([op["args"]["bytes"] for op in backward], [routed] * 3)
        for op in forward + backward:
            self.assertEqual(op["args"]["collective"], "all_to_all")
        self.assertEqual([op["loc"]["line"] for op in forward[:3]],
                         [line_of(path, "all_to_all_single(per_expert"), line_of(path, "routed = all_to_all"),
                          line_of(path, "back = all_to_all")])
        # The split sizes read on the host come from the even counts every rank is taken to
        # send: the grouped GEMMs of this rank's 2 experts get all the tokens it receives.
        grouped = [op for op in trace["ops"] if op["name"] == "aten::_grouped_mm" and op["phase"] == "forward"]
        self.assertEqual([op["inputs"][0]["shape"] for op in grouped], [[tokens, 512], [tokens, 2048]] * 2)
        self.assertEqual(grouped[0]["inputs"][1]["shape"], [2, 512, 2048])
        notes = [(w["line"], w["origin"]["line"]) for w in trace["warnings"] if w["kind"] == "even_routing"]
        pick = line_of(path, ".topk(TOP_K")
        self.assertEqual(notes, [(line_of(path, "send = per_expert"), pick),
                                 (line_of(path, "receive = per_expert_here"), pick)])
        local_experts = 2 * 2 * 512 * 2048 * FLOAT  # 2 experts' up and down of each block
        self.assertEqual(trace["memory"]["parameters_bytes"],
                         2 * (local_experts + 512 * 16 * FLOAT) + linear_bytes(512, 10))

    def test_pipeline_first_stage_sends_activations_and_receives_gradients(self):
        path = sample("pipeline.py")
        trace = run_trace(path, batch_size=8, world_size=4)
        self.assertEqual(trace["distributed"]["world_size"], 4)
        self.assertEqual(trace["distributed"]["local_world_size"], 4)
        microbatch = 8 // 4 * 256 * FLOAT
        ops = collectives(trace)
        self.assertEqual([op["args"]["collective"] for op in ops], ["send"] * 4 + ["recv"] * 4)
        for op in ops:
            self.assert_collective(op, op["args"]["collective"], microbatch, group_size=4)
            self.assertEqual(op["args"]["peer"], 1)
            self.assertEqual(op["loc"]["line"], line_of(path, "schedule.step(tokens)"))
        # GPipe waits for its sends after the last forward; each receive at once.
        self.assertTrue(all(op["args"]["async"] for op in ops[:3]))
        self.assertFalse(any(op["args"]["async"] for op in ops[4:]))
        # Rank 0 holds 8 / 4 = 2 blocks; 4 microbatches through 2 blocks of 2 Linears each,
        # and not the stage's one-time shape inference.
        block = linear_bytes(256, 1024) + linear_bytes(1024, 256)
        self.assertEqual(trace["memory"]["parameters_bytes"], 2 * block)
        forward_gemms = [op for op in trace["ops"] if op["name"] == "aten::addmm" and op["phase"] == "forward"]
        self.assertEqual(len(forward_gemms), 4 * 2 * 2)
        self.assertEqual([w for w in trace["warnings"] if w["kind"] == "unsupported_distributed"], [])

    def test_a_scripts_own_calls_and_the_ones_one_rank_cannot_run(self):
        trace = run_trace(CALLS, batch_size=16)
        ops = collectives(trace)
        activation = 16 * 64 * FLOAT
        self.assertEqual([(op["name"], op["args"]["collective"], op["args"]["bytes"], op["loc"]["line"])
                          for op in ops], [
            ("c10d::allreduce_", "all_reduce", activation, line_of(CALLS, "dist.all_reduce(y)")),
            ("c10d::_allgather_base_", "all_gather", 8 * activation, line_of(CALLS, "all_gather_into_tensor")),
            ("c10d::_reduce_scatter_base_", "reduce_scatter", activation, line_of(CALLS, "reduce_scatter_tensor")),
            ("c10d::broadcast_", "broadcast", activation, line_of(CALLS, "dist.broadcast")),
            ("c10d::alltoall_base_", "all_to_all", activation, line_of(CALLS, "all_to_all_single")),
        ])
        synchronous = [op for op in ops if op["name"] != "c10d::_allgather_base_"]
        self.assertFalse(any(op["args"]["async"] for op in synchronous))
        # async_op=True: overlapped with `y * 2`, waited for before `gathered.sum()`.
        gather = ops[1]
        self.assertTrue(gather["args"]["async"])
        waiter = op_by_id(trace, gather["args"]["wait_op"])
        self.assertEqual((waiter["name"], waiter["loc"]["line"]), ("aten::sum", line_of(CALLS, "gathered.sum()")))
        self.assertEqual(op_by_id(trace, gather["id"] + 1)["name"], "aten::mul")
        # Object collectives and gloo's monitored_barrier: a note at their lines; the script goes on.
        notes = [w for w in trace["warnings"] if w["kind"] == "unsupported_distributed"]
        self.assertEqual([(w["call"], w["line"], w["severity"]) for w in notes], [
            ("all_gather_object", line_of(CALLS, "dist.all_gather_object"), "warning"),
            ("monitored_barrier", line_of(CALLS, "dist.monitored_barrier"), "warning"),
        ])
        self.assertIn("backward", {op["phase"] for op in trace["ops"]})

    def test_world_size_comes_from_the_request(self):
        trace = run_trace(sample("tensor_parallel.py"), batch_size=2, world_size=2)
        self.assertEqual(trace["distributed"]["world_size"], 2)
        ops = collectives(trace)
        self.assertEqual({op["args"]["group_size"] for op in ops}, {2})
        ups = [op for op in trace["ops"] if op["name"] == "aten::addmm" and op["module"] == "blocks.0.up"]
        self.assertEqual(ups[0]["outputs"][0]["shape"], [256, 512])
        with self.assertRaises(TraceError) as raised:
            run_trace(sample("tensor_parallel.py"), world_size=0)
        self.assertEqual(raised.exception.kind, "bad_request")

    def test_a_launch_sees_its_nodes_gpus_before_it_makes_its_process_group(self):
        # pytorch/examples' FSDP2 example: enough GPUs? (before init_process_group); a
        # spawned launch sizes itself by the GPU count.
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "train.py")
            with open(path, "w") as f:
                f.write(textwrap.dedent("""
                    import os
                    import torch
                    import torch.distributed as dist
                    from torch.nn.parallel import DistributedDataParallel as DDP

                    assert torch.cuda.device_count() == 4 and torch.accelerator.device_count() == 4
                    dist.init_process_group("nccl")
                    model = DDP(torch.nn.Linear(8, 8).to(int(os.environ["LOCAL_RANK"])))
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                    for step in range(3):
                        model(torch.randn(4, 8).cuda()).sum().backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    """))
            trace = run_trace(path, world_size=4)
        self.assertEqual(trace["distributed"]["world_size"], 4)
        self.assertEqual([op["args"]["group_size"] for op in collectives(trace)], [4])

    def test_a_script_run_as_written_is_one_process_unless_a_launch_is_asked_for(self):
        # nanoGPT makes its process group only when torchrun set RANK; a torchrun-only script
        # is told to ask for its launch.
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "train.py")
            with open(path, "w") as f:
                f.write(textwrap.dedent("""
                    import os
                    from torch.distributed import init_process_group

                    if int(os.environ.get("RANK", -1)) != -1:
                        init_process_group(backend="nccl")
                    """) + TRAIN)
            self.assertNotIn("distributed", run_trace(path))
            self.assertEqual(run_trace(path, world_size=2)["distributed"]["world_size"], 2)
            with open(path, "w") as f:
                f.write("import os\nrank = int(os.environ['LOCAL_RANK'])\n")
            with self.assertRaises(TraceError) as raised:
                run_trace(path)
            self.assertIn("--world-size", raised.exception.hint)

    def test_llama3_gathers_bf16_parameters_reduces_fp32_gradients_and_frees_what_it_gathers(self):
        # torchtitan's Llama 3 8B at two and three blocks, one 8,192-token sequence, as rank
        # 0 of 16. MixedPrecisionPolicy(bf16 parameters, fp32 reduction).
        block = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
        root = 2 * 128256 * 4096 + 4096  # embedding, output head, final norm
        traces = {}
        for layers in (2, 3):
            os.environ["LLAMA3_LAYERS"] = str(layers)
            try:
                traces[layers] = run_trace(sample("llama3_fsdp.py"), batch_size=1, world_size=16)
            finally:
                del os.environ["LLAMA3_LAYERS"]
        trace = traces[2]
        gathers = [op for op in collectives(trace) if op["args"]["collective"] == "all_gather"]
        scatters = [op for op in collectives(trace) if op["args"]["collective"] == "reduce_scatter"]
        # Forward gathers the root, then each block; backward the root again and the first
        # block (the last one stays gathered after forward, reshard_after_forward=False).
        self.assertEqual([(op["phase"], op["args"]["bytes"]) for op in gathers], [
            ("forward", 2 * root), ("forward", 2 * block), ("forward", 2 * block),
            ("backward", 2 * root), ("backward", 2 * block)])
        self.assertEqual([op["args"]["bytes"] for op in scatters], [4 * block, 4 * block, 4 * root])
        for op in gathers + scatters:
            self.assert_collective(op, op["args"]["collective"], op["args"]["bytes"], group_size=16)
        self.assertEqual(trace["memory"]["parameters_bytes"], 4 * (root + 2 * block) // 16)
        # One more block adds to the peak (the loss's backward) its fp32 parameter shard, its
        # AdamW state and what per-op checkpointing keeps of it, and nothing of its gathered
        # bf16 parameters, freed after its forward: its input, the outputs of wq, wv, w1 and
        # w2 (every other mm), attention's output and log-sum-exp, and a few scalars (each
        # optimizer step counter, attention's RNG state).
        tokens, mib = 8192, 1 << 20
        kept = (tokens * 4096 * 2 * 4 + tokens * 1024 * 2 + tokens * 14336 * 2  # in, wq, w2, flash; wv; w1
                + 32 * tokens * 4)
        self.assertEqual(kept, 497 * mib)
        grown = traces[3]["memory"]["peak_live_bytes"] - trace["memory"]["peak_live_bytes"]
        shard = 4 * block // 16
        self.assertAlmostEqual(grown - 3 * shard, kept, delta=64)
        # Counted as saved for backward too, though the checkpoint's policy keeps them past
        # autograd's saved-tensor hooks.
        saved = traces[3]["memory"]["activations_saved_bytes"] - trace["memory"]["activations_saved_bytes"]
        self.assertAlmostEqual(saved, kept, delta=64)
        for layers in (2, 3):
            self.assertEqual(traces[layers]["ops"][traces[layers]["memory"]["peak_op_id"]]["name"],
                             "aten::_log_softmax_backward_data")

    def test_traces_in_one_worker_do_not_leak_into_each_other(self):
        first = run_trace(sample("ddp.py"), batch_size=4)
        run_trace(sample("tensor_parallel.py"), batch_size=2)
        again = run_trace(sample("ddp.py"), batch_size=4)
        self.assertEqual([(op["name"], op["args"]) for op in collectives(first)],
                         [(op["name"], op["args"]) for op in collectives(again)])
        self.assertNotIn("RANK", os.environ)


class NonDistributedScripts(unittest.TestCase):
    def test_a_script_without_torch_distributed_is_traced_as_before(self):
        path = os.path.join(SAMPLES, "small_cnn.py")
        default = run_trace(path, batch_size=8)
        alone = run_trace(path, batch_size=8, world_size=1)
        self.assertNotIn("distributed", default)
        self.assertEqual(collectives(default), [])
        self.assertEqual([(op["name"], op["inputs"], op["loc"]) for op in default["ops"]],
                         [(op["name"], op["inputs"], op["loc"]) for op in alone["ops"]])
        self.assertEqual(default["memory"], alone["memory"])
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"):
            self.assertNotIn(name, os.environ)

    def test_a_single_gpu_script_sees_no_torchrun_variables(self):
        # HF Trainer and Accelerate read LOCAL_RANK != -1 as a distributed launch.
        path = os.path.join(FIXTURES, "reads_launch_environment.py")
        trace = run_trace(path, batch_size=4)
        self.assertNotIn("distributed", trace)
        # Asked for a world size, the script gets the launch's variables (and here refuses it).
        with self.assertRaises(TraceError) as raised:
            run_trace(path, batch_size=4, world_size=2)
        self.assertIn("torchrun variables set", raised.exception.message)
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"):
            self.assertNotIn(name, os.environ)

    @unittest.skipIf(HAS_FAKE_PROCESS_GROUP, "this torch has a fake process group: the samples trace")
    def test_without_a_fake_process_group_the_script_is_told_why(self):
        path = sample("ddp.py")
        with self.assertRaises(TraceError) as raised:
            run_trace(path, batch_size=4)
        self.assertEqual(raised.exception.kind, "unsupported_operation")
        self.assertIn("fake process group", raised.exception.message)
        self.assertEqual(raised.exception.line, line_of(path, "dist.init_process_group"))


if __name__ == "__main__":
    unittest.main()
