// Drives the real `wavecast` binary: exit status, output and one-line errors.
#include "cli_expectations.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

TEST(CliTest, HelpListsCommands) {
  const CliRun run = wavecast("--help");
  EXPECT_EQ(run.status, 0);
  for (const char* command : {"predict", "gpus", "trace"})
    EXPECT_TRUE(contains(run.out, command)) << run.out;
  for (const char* command : {"predict", "gpus", "trace"}) {
    const CliRun sub = wavecast(std::string(command) + " --help");
    EXPECT_EQ(sub.status, 0) << command;
    EXPECT_TRUE(contains(sub.out, std::string("usage: wavecast ") + command)) << sub.out;
  }
}

// Descriptions are wrapped at word boundaries within 80 columns, never cut.
TEST(CliTest, HelpWrapsDescriptionsAtWordBoundaries) {
  const auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      out.push_back(line);
    return out;
  };
  const auto words = [](const std::string& text) {
    std::istringstream in(text);
    std::string joined;
    for (std::string word; in >> word;)
      joined += (joined.empty() ? "" : " ") + word;
    return joined;
  };
  const CliRun overview = wavecast("--help");
  ASSERT_EQ(overview.status, 0);
  for (const auto& line : lines(overview.out))
    EXPECT_LE(line.size(), 80u) << line;
  // predict's first sentence, whole, across its wrapped lines.
  EXPECT_TRUE(contains(words(overview.out),
                       "predict Trace one training iteration of FILE.py without a GPU and "
                       "predict, for each source line and each named GPU, its time; then "
                       "iteration time, samples/s, cost and memory per GPU. gpus"))
      << overview.out;

  for (const char* command : {"predict", "trace", "serve", "gpus"}) {
    const CliRun help = wavecast(std::string(command) + " --help");
    ASSERT_EQ(help.status, 0) << command;
    for (const auto& line : lines(help.out))
      EXPECT_LE(line.size(), 80u) << command << ": " << line;
  }
  const CliRun serve = wavecast("serve --help");
  EXPECT_TRUE(contains(words(serve.out),
                       "--mode MODE shape (default: no GPU needed) or measured (on this machine's "
                       "GPU, scaled to the other targets)"))
      << serve.out;
}

TEST(CliTest, NoArgumentsPrintsUsageAndFails) {
  const CliRun run = wavecast("");
  EXPECT_EQ(run.status, 2);
  EXPECT_TRUE(contains(run.err, "usage: wavecast"));
}

TEST(CliTest, UnknownCommandAndOption) {
  expectOneLineError(wavecast("frobnicate"), "unknown command 'frobnicate'");
  expectOneLineError(wavecast("predict " + sample("small_cnn.py") + " --gpu T4 --fast"),
                     "unknown option '--fast'");
  expectOneLineError(wavecast("predict " + sample("small_cnn.py") + " --gpu"), "needs a value");
  expectOneLineError(wavecast("predict " + sample("small_cnn.py")), "--gpu is required");
  expectOneLineError(wavecast("predict " + sample("small_cnn.py") + " --gpu T4 --batch-size -3"),
                     "positive integer");
}

// train and eval parse their numbers as every other command does, before loading
// any data.
TEST(CliTest, TrainAndEvalCheckTheirNumbers) {
  expectOneLineError(wavecast("train --epochs=x"), "--epochs must be a positive integer, not 'x'");
  expectOneLineError(wavecast("train --threads 0"), "--threads must be a positive integer");
  expectOneLineError(wavecast("eval --logo --seed -3"),
                     "--seed must be a non-negative integer, not '-3'");
  expectOneLineError(wavecast("eval --logo --max-rows=-1"),
                     "--max-rows must be a non-negative integer");
}

TEST(CliTest, MissingFile) {
  expectOneLineError(wavecast("predict /nonexistent/train.py --gpu T4"), "no such file");
}

TEST(CliTest, ADirectoryIsNotAScript) {
  const CliRun run = wavecast("predict " + std::string(WAVECAST_SOURCE_ROOT) + "/samples --gpu T4");
  expectOneLineError(run, "samples' is a directory; pass the path of a training script (.py)");
  EXPECT_EQ(run.status, 1);
}

// A TCP daemon's token must be worth having; a token file others can read is warned of.
TEST(CliTest, ServeRefusesAnEmptyOrShortToken) {
  const std::string how =
      "a token needs at least 16 characters: make one with 'openssl rand -hex 16'";
  CliRun run = wavecast("serve --listen 127.0.0.1:0 --token ''");
  expectOneLineError(run, "--token is empty; " + how);
  EXPECT_EQ(run.status, 2);
  run = wavecast("serve --listen 127.0.0.1:0 --token=hunter2");
  expectOneLineError(run, "--token has only 7 characters; " + how);
  EXPECT_EQ(run.status, 2);

  char dir[] = "/tmp/wavecast-token-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/serve.token";
  std::ofstream(file) << "abc\n";
  run = wavecast("serve --listen 127.0.0.1:0 --token-file " + file);
  expectOneLineError(run, "the token in " + file + " has only 3 characters; " + how);
  EXPECT_EQ(run.status, 1);

  // Readable by others: a warning, then the daemon serves (stopped here after 3 s).
  std::ofstream(file) << std::string(32, 'a') << "\n";
  ASSERT_EQ(::chmod(file.c_str(), 0644), 0);
  run = wavecast("serve --listen 127.0.0.1:0 --token-file " + file, "timeout -s TERM 3");
  EXPECT_TRUE(contains(run.err, "wavecast serve: warning: permissions 0644 for the token file " +
                                    file +
                                    " are too open: other users can read or change the "
                                    "token; chmod 600 " +
                                    file + "\n"))
      << run.err;
  EXPECT_TRUE(contains(run.err, "listening on 127.0.0.1:")) << run.err;
  std::filesystem::remove_all(dir);
}

TEST(CliTest, UnknownGpuListsCloseNames) {
  const CliRun run = wavecast("predict " + sample("small_cnn.py") + " --gpu H1OO");
  expectOneLineError(run, "H1OO");
  EXPECT_TRUE(contains(run.err, "H100")) << run.err;
}

// eval picks NeuSight's GPUs by folder or GPU name, forgivingly; an unknown GPU gets the
// GPU database's error, and a known GPU that NeuSight never measured says which it did.
TEST(CliTest, EvalPicksNeuSightGpusByName) {
  const std::string root = WAVECAST_SOURCE_ROOT;
  const std::string neusight = root + "/../shared/data/neusight";
  if (!std::filesystem::is_directory(neusight + "/kernels"))
    GTEST_SKIP() << "no NeuSight data at " << neusight << " (../shared beside the checkout)";
  const std::string data = " --data " + neusight + " --gpus " + root +
                           "/data/gpus.json --weights " + root + "/data/weights --json";
  CliRun run = wavecast("eval --kernels --gpu H1OO" + data);
  expectOneLineError(run, "unknown GPU 'H1OO'; did you mean H100-SXM");
  run = wavecast("eval --kernels --gpu L40S" + data);
  expectOneLineError(run, "the NeuSight data has no measurements of L40S; it has:");
  EXPECT_TRUE(contains(run.err, " H100-SXM")) << run.err;
  expectOneLineError(wavecast("eval --kernels --gpu H100-SXM" + data),
                     "no kernel measurements of these GPUs");

  // "a100" picks every A100 card NeuSight timed; "v100" the one V100 it has.
  const auto gpusOf = [&](const std::string& name) {
    const CliRun picked = wavecast("eval --kernels --gpu " + name + data);
    EXPECT_EQ(picked.status, 0) << picked.err;
    std::set<std::string> gpus;
    const nlohmann::json report = nlohmann::json::parse(picked.out);
    for (const auto& family : report["families"])
      gpus.insert(family["gpu"].get<std::string>());
    return gpus;
  };
  EXPECT_EQ(gpusOf("a100"),
            (std::set<std::string>{"NVIDIA_A100-PCIE-40GB", "NVIDIA_A100_80GB_PCIe"}));
  EXPECT_EQ(gpusOf("v100"), (std::set<std::string>{"Tesla_V100-PCIE-32GB"}));
}

TEST(CliTest, FileWithoutProvidersSaysWhatToWrite) {
  const CliRun run = wavecast("predict " + fixture("no_providers.py") + " --gpu T4");
  expectOneLineError(run, "wavecast_model");
}

TEST(CliTest, ScriptThatRaisesPointsAtTheLine) {
  const CliRun run = wavecast("predict " + fixture("raises.py") + " --gpu T4");
  expectOneLineError(run, "raises.py:14");
  EXPECT_TRUE(contains(run.err, "ZeroDivisionError")) << run.err;
}

// torch logs a failed meta kernel with its traceback (about 20 lines on stderr) before
// raising; wavecast's one line is all that shows, unless --verbose asks for the rest.
TEST(CliTest, ShapeErrorIsOneLineAndVerboseShowsTorchsLog) {
  const CliRun run = wavecast("predict " + fixture("shape_error.py") + " --gpu T4");
  expectOneLineError(run, "shape_error.py:15");
  EXPECT_TRUE(contains(run.err, "RuntimeError: a and b must have same reduction dim")) << run.err;

  const CliRun verbose = wavecast("predict " + fixture("shape_error.py") + " --gpu T4 --verbose");
  EXPECT_EQ(verbose.status, 1);
  EXPECT_TRUE(contains(verbose.err, "failed while attempting to run meta for aten.mm"))
      << verbose.err;
  EXPECT_TRUE(contains(verbose.err, "Traceback")) << verbose.err;
  const std::string last = verbose.err.substr(verbose.err.rfind('\n', verbose.err.size() - 2) + 1);
  EXPECT_EQ(last, run.err) << "the one-line error comes last";
}

TEST(CliTest, NotATraceFile) {
  expectOneLineError(wavecast("predict " + fixture("not_json.json") + " --gpu T4"),
                     "not valid JSON");
}

TEST(CliTest, GpusListsTheDatabase) {
  const CliRun run = wavecast("gpus --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto doc = nlohmann::json::parse(run.out);
  std::set<std::string> ids;
  for (const auto& gpu : doc.at("gpus")) {
    ids.insert(gpu.at("id").get<std::string>());
    EXPECT_GT(gpu.at("memory_bandwidth_gbs").get<double>(), 0) << gpu.at("id");
    EXPECT_GT(gpu.at("sm_count").get<int>(), 0) << gpu.at("id");
    EXPECT_GT(gpu.at("host_to_device_gbs").get<double>(), 0) << gpu.at("id");
    EXPECT_GT(gpu.at("device_to_host_gbs").get<double>(), 0) << gpu.at("id");
    if (gpu.at("id") == "H100-SXM") {
      EXPECT_EQ(gpu.at("host_link"), "PCIe 5.0 x16");
      EXPECT_DOUBLE_EQ(gpu.at("device_to_host_gbs").get<double>(), 52.8);
    }
  }
  EXPECT_GE(ids.size(), 20u);
  const CliRun table = wavecast("gpus");
  EXPECT_EQ(table.status, 0);
  EXPECT_TRUE(contains(table.out, "T4")) << table.out;
  EXPECT_TRUE(contains(table.out, "H2D")) << table.out;
}

TEST(CliTest, PredictPrintsPerLineTableForThreeGpus) {
  const CliRun run = wavecast("predict " + sample("small_cnn.py") + " --gpu H100,A100,T4");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(run.err.empty()) << "progress must stay quiet when stderr is not a terminal:\n"
                               << run.err;
  // Three GPU columns in the header and the model's forward line in the body.
  const size_t start = run.out.find("\nline ");
  ASSERT_NE(start, std::string::npos) << run.out;
  const std::string header = run.out.substr(start + 1, run.out.find('\n', start + 1) - start - 1);
  EXPECT_TRUE(contains(header, "H100")) << header;
  EXPECT_TRUE(contains(header, "A100")) << header;
  EXPECT_TRUE(contains(header, "T4")) << header;
  EXPECT_TRUE(contains(run.out, "small_cnn.py:")) << run.out;
  EXPECT_TRUE(contains(run.out, "samples/s")) << run.out;
  EXPECT_TRUE(contains(run.out, "GPU busy")) << run.out;
  // Batch 64 of a 32x32 CNN keeps an H100 waiting for the CPU (3.5 ms for 0.6 ms of
  // kernels on the real one): the table and a note say so.
  EXPECT_TRUE(contains(run.out, "* host-bound: the GPU waits for the CPU")) << run.out;
  EXPECT_TRUE(contains(run.out, "note: H100-SXM: host-bound")) << run.out;
  // The header names the torch that traced and its environment (the build's venv).
  EXPECT_TRUE(contains(run.out, "(shape mode) with torch 2.")) << run.out;
  EXPECT_TRUE(contains(run.out, "python-env)\n")) << run.out;
}

// A python3 of another installation first on PATH (pyenv, conda) must not
// replace the interpreter the worker was built against: this one has the
// standard library but none of the system's packages, so no torch.
TEST(CliTest, AnotherPython3OnPathDoesNotHideTorch) {
  char dir[] = "/tmp/wavecast-otherpy-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string root = dir;
  const std::string python = std::string("python") + WAVECAST_PYTHON_VERSION;
  const std::string setup = "mkdir -p " + root + "/bin " + root + "/lib && cp /usr/bin/" + python +
                            " " + root + "/bin/python3 && ln -s /usr/lib/" + python + " " + root +
                            "/lib/" + python;
  ASSERT_EQ(std::system(setup.c_str()), 0);
  const CliRun run = wavecast("predict " + sample("small_cnn.py") + " --gpu T4 --json",
                              "PATH=" + root + "/bin:$PATH");
  std::system(("rm -rf " + root).c_str());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out).at("gpus")[0], "T4");
}

TEST(CliTest, PredictJsonIsConsistent) {
  const CliRun run =
      wavecast("predict " + sample("small_cnn.py") + " --gpu H100,T4 --batch-size 16 --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto doc = nlohmann::json::parse(run.out);
  EXPECT_EQ(doc.at("batch_size"), 16);
  ASSERT_EQ(doc.at("summaries").size(), 2u);
  const auto& h100 = doc.at("summaries")[0];
  const auto& t4 = doc.at("summaries")[1];
  EXPECT_LT(h100.at("gpu_ms").get<double>(), t4.at("gpu_ms").get<double>())
      << "an H100 computes faster than a T4";
  for (const auto* summary : {&h100, &t4}) {
    const double wall = summary->at("iteration_ms").get<double>();
    EXPECT_GE(wall, summary->at("gpu_ms").get<double>()) << "the wall time holds the kernels";
    EXPECT_GE(wall, summary->at("host_ms").get<double>()) << "and the CPU's issuing";
    // Each of the three is written to the nanosecond (Milliseconds), rounded on its own.
    EXPECT_NEAR(summary->at("gpu_idle_ms").get<double>(),
                wall - summary->at("gpu_ms").get<double>(), 1.5e-6);
  }
  EXPECT_TRUE(h100.at("host_bound").get<bool>()) << "batch 16 of a small CNN";
  EXPECT_NEAR(h100.at("samples_per_second").get<double>(),
              16 / (h100.at("iteration_ms").get<double>() / 1000.0), 1e-6 * 16);
  double lineSum = 0;
  for (const auto& line : doc.at("lines"))
    lineSum += line.at("per_gpu")[0].at("total_ms").get<double>();
  EXPECT_NEAR(lineSum, h100.at("iteration_ms").get<double>(),
              1e-6 + 1e-3 * h100.at("iteration_ms").get<double>())
      << "per-line times add up to the iteration";
  // The torch that traced it, and the venv it came from.
  EXPECT_EQ(doc.at("torch_version").get<std::string>().rfind("2.", 0), 0u) << doc["torch_version"];
  EXPECT_TRUE(contains(doc.at("python_env").get<std::string>(), "python-env")) << doc["python_env"];
  EXPECT_EQ(doc.at("trace_mode"), "shape");
  for (const auto& warning : doc.at("trace_warnings"))
    EXPECT_NE(warning.at("kind"), "old_torch") << "torch 2.x is what the figures are checked on";
}

// A multi-GPU layout of a single-GPU script (docs/parallel.md): one trace, saved, then
// predicted as 2 x 2 GPUs and with a tensor-parallel degree the model's 8 heads refuse.
TEST(CliTest, PredictAMultiGpuLayout) {
  char dir[] = "/tmp/wavecast-layout-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string saved = std::string(dir) + "/transformer.json";
  const CliRun traced =
      wavecast("trace " + sample("transformer.py") + " --batch-size 4 --out " + saved);
  ASSERT_EQ(traced.status, 0) << traced.err;
  const CliRun run = wavecast("predict " + saved + " --gpu H100 --dp 2 --tp 2 --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto doc = nlohmann::json::parse(run.out);
  ASSERT_EQ(doc.at("parallel").size(), 1u);
  const auto& layout = doc.at("parallel")[0];
  EXPECT_EQ(layout.at("gpus"), 4);
  EXPECT_EQ(layout.at("global_batch"), 8);
  EXPECT_EQ(layout.at("system"), "HGX-H100") << "an H100's usual node";
  EXPECT_GT(layout.at("communication_ms").get<double>(), 0);
  bool collective = false;
  for (const auto& op : doc.at("ops"))
    collective |= op.at("family") == "collective";
  EXPECT_TRUE(collective) << "the rank's ops hold its collectives";
  const CliRun refused = wavecast("predict " + saved + " --gpu H100 --tp 3");
  std::system(("rm -rf " + std::string(dir)).c_str());
  EXPECT_EQ(refused.status, 1);
  expectOneLineError(refused, "does not divide the model's 8 attention heads");
}

TEST(CliTest, WorldSizeSetsTheLaunchADistributedScriptIsTracedIn) {
  char dir[] = "/tmp/wavecast-world-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string saved = std::string(dir) + "/fsdp2.json";
  const CliRun traced = wavecast("trace " + sample("distributed/fsdp2.py") +
                                 " --batch-size 4 --world-size 16 --out " + saved);
  ASSERT_EQ(traced.status, 0) << traced.err;
  const auto trace = nlohmann::json::parse(slurp(saved));
  std::system(("rm -rf " + std::string(dir)).c_str());
  EXPECT_EQ(trace.at("distributed").at("world_size"), 16);
  int collectives = 0;
  for (const auto& op : trace.at("ops"))
    if (op.at("args").contains("collective")) {
      ++collectives;
      EXPECT_EQ(op.at("args").at("group_size"), 16) << op.dump();
    }
  EXPECT_GT(collectives, 0);
  expectOneLineError(wavecast("trace " + sample("distributed/fsdp2.py") + " --world-size 0"),
                     "--world-size");
}

TEST(CliTest, CompileAsksWhatTorchCompileWouldDo) {
  const auto gpuMs = [](const CliRun& run) {
    return nlohmann::json::parse(run.out).at("summaries").at(0).at("gpu_ms").get<double>();
  };
  const std::string predict = "predict " + sample("gpt2.py") + " --gpu H100 --batch-size 8 --json";
  const CliRun eager = wavecast(predict);
  const CliRun compiled = wavecast(predict + " --compile default");
  ASSERT_EQ(eager.status, 0) << eager.err;
  ASSERT_EQ(compiled.status, 0) << compiled.err;
  // The head padded and the chains fused: FP32 GPT-2 compiled gained 10% on the H200.
  EXPECT_LT(gpuMs(compiled), 0.95 * gpuMs(eager));
  EXPECT_GT(gpuMs(compiled), 0.75 * gpuMs(eager));
  const auto warnings = nlohmann::json::parse(compiled.out).at("trace_warnings");
  ASSERT_EQ(warnings.size(), 1u) << warnings.dump();
  EXPECT_EQ(warnings[0].at("kind"), "torch_compile");
  EXPECT_FALSE(warnings[0].contains("line")) << "the request's, not a line's";
  const CliRun bad = wavecast("predict " + sample("gpt2.py") + " --gpu H100 --compile fast");
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(contains(bad.err, "--compile must be default")) << bad.err;
}

// Published FP32 training throughput of ResNet-50 is about 90-100 images/s on a
// T4 and 350-450 on an A100 (no TF32): batch 32 takes roughly 330 ms and 80 ms.
// The bounds are wide; they catch a model that extrapolates to nonsense.
TEST(CliTest, SavedMeasuredTraceIsTheMeasurementsOnItsGpuAndScaledElsewhere) {
  const std::string trace =
      std::string(WAVECAST_SOURCE_ROOT) + "/tests/predictor/fixtures/measured_small_cnn.json";
  const CliRun table = wavecast("predict " + trace + " --gpu H100,T4 --roofline");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_TRUE(contains(table.out, "H100-SXM: measured on H100-SXM; T4: scaled from H100-SXM"))
      << table.out;
  const CliRun run = wavecast("predict " + trace + " --gpu H100,T4 --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto doc = nlohmann::json::parse(run.out);
  EXPECT_EQ(doc["trace_mode"], "cuda");
  EXPECT_EQ(doc["summaries"][0]["method"], "measured on H100-SXM");
  EXPECT_NEAR(doc["summaries"][0]["gpu_ms"].get<double>(), 0.1491, 1e-9)
      << "the fixture's kernels, as measured";
  const std::string scaled = doc["summaries"][1]["method"];
  EXPECT_EQ(scaled.rfind("scaled from H100-SXM", 0), 0u) << scaled;
  EXPECT_GT(doc["summaries"][1]["gpu_ms"].get<double>(), 0.1491) << "a T4 is slower";
}

TEST(CliTest, CpuTensorMixedWithGpuTensorsIsANoteOnItsLine) {
  const std::string script =
      std::string(WAVECAST_SOURCE_ROOT) + "/tests/python/fixtures/cpu_tensor_in_iteration.py";
  const CliRun run = wavecast("predict " + script + " --gpu H100 --roofline --batch-size 4");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "note: " + script + ":")) << run.out;
  EXPECT_TRUE(contains(run.out, ": a tensor created on the CPU inside the iteration")) << run.out;
}

TEST(CliTest, ResNet50PredictionIsPlausible) {
  const CliRun run =
      wavecast("predict " + sample("resnet50.py") + " --gpu H100,A100,T4 --batch-size 32 --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto doc = nlohmann::json::parse(run.out);
  const auto ms = [&](size_t i) { return doc.at("summaries")[i].at("iteration_ms").get<double>(); };
  EXPECT_GT(ms(2), 150.0);
  EXPECT_LT(ms(2), 900.0);
  EXPECT_GT(ms(1), 40.0);
  EXPECT_LT(ms(1), 300.0);
  EXPECT_LT(ms(0), ms(1)) << "H100 faster than A100";
  EXPECT_LT(ms(1), ms(2)) << "A100 faster than T4";
  for (const auto& op : doc.at("ops"))
    for (const auto& gpu : op.at("per_gpu"))
      EXPECT_LT(gpu.at("time_ms").get<double>(), 1000.0)
          << op.at("name") << " on " << gpu.at("gpu");
}

} // namespace

// A script without providers runs as written: the words after "--" are its sys.argv[1:]
// (here --batch-size is the script's, not wavecast's), and without them its argparse
// exit is one clear error at the line that parsed.
TEST(CliTest, AScriptRunsFromTheFolderWavecastWasStartedIn) {
  // `python scripts/train.py` from a repository's top reads `data/width.txt` from there.
  char dir[] = "/tmp/wavecast-cwd-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  const std::string top = dir;
  ASSERT_EQ(mkdir((top + "/data").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((top + "/scripts").c_str(), 0755), 0);
  std::ofstream(top + "/data/width.txt") << "24\n";
  std::ofstream(top + "/scripts/train.py") << R"(import torch
width = int(open("data/width.txt").read())
model = torch.nn.Linear(width, width).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    model(torch.randn(2, width, device="cuda")).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
)";
  const CliRun run = wavecast("trace scripts/train.py --compact", "cd " + top + " &&");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto trace = nlohmann::json::parse(run.out);
  bool sawLinear = false;
  for (const auto& op : trace.at("ops"))
    if (op.at("name") == "aten::addmm") {
      sawLinear = true;
      EXPECT_EQ(op.at("outputs").at(0).at("shape"), nlohmann::json::array({2, 24}));
    }
  EXPECT_TRUE(sawLinear);
  std::filesystem::remove_all(top);
}

TEST(CliTest, WordsAfterDoubleDashAreTheScriptsArguments) {
  const CliRun run =
      wavecast("trace " + fixture("argv_script.py") + " --compact -- --width 96 --batch-size 5");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto trace = nlohmann::json::parse(run.out);
  EXPECT_EQ(trace.at("script_args"), nlohmann::json::array({"--width", "96", "--batch-size", "5"}));
  EXPECT_EQ(trace.at("batch_size"), 5);
  bool sawLinear = false;
  for (const auto& op : trace.at("ops"))
    if (op.at("name") == "aten::addmm" && op.at("phase") == "forward") {
      sawLinear = true;
      EXPECT_EQ(op.at("outputs").at(0).at("shape"), nlohmann::json::array({5, 96}));
      EXPECT_EQ(op.at("loc").at("line"), 16); // loss = model(x).square().mean()
    }
  EXPECT_TRUE(sawLinear);

  const CliRun missing = wavecast("predict " + fixture("argv_script.py") + " --gpu H100");
  expectOneLineError(missing, "argv_script.py:10");
  EXPECT_TRUE(contains(missing.err, "sys.exit(2)")) << missing.err;
  // What argparse printed says why.
  EXPECT_TRUE(contains(missing.err,
                       "it printed: argv_script.py: error: the following arguments are "
                       "required: --width"))
      << missing.err;
  const CliRun verbose = wavecast("predict " + fixture("argv_script.py") + " --gpu H100 --verbose");
  EXPECT_TRUE(contains(verbose.err, "usage: argv_script.py")) << verbose.err;
}
