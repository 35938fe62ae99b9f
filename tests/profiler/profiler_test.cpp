// Drives the real wavecast-worker: every failure kind, and that the next
// trace after each failure works.
#include "trace_results.h"
#include "wavecast/profiler/profiler.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <thread>

namespace wavecast {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string fixture(const std::string& name) {
  return std::string(WAVECAST_FIXTURES_DIR) + "/" + name;
}

ProfilerOptions options() {
  ProfilerOptions o;
  o.workerPath = WAVECAST_WORKER_PATH;
  o.pythonPath = WAVECAST_TRACER_PYTHON_DIR;
  return o;
}

using testing::expectError;
using testing::expectTrace;
using testing::request;

size_t countOps(const Trace& trace, const std::string& name, Phase phase) {
  return std::count_if(trace.ops.begin(), trace.ops.end(),
                       [&](const OpRecord& op) { return op.name == name && op.phase == phase; });
}

// The small CNN traced after a failure proves the worker recovered.
void expectNextTraceWorks(Profiler& profiler) {
  const Trace trace =
      expectTrace(profiler.trace(request(std::string(WAVECAST_SAMPLES_DIR) + "/small_cnn.py")));
  EXPECT_EQ(countOps(trace, "aten::convolution", Phase::Forward), 3u);
}

TEST(Profiler, TracesSmallCnnWithLinesAndPhases) {
  std::vector<std::string> progress;
  ProfilerOptions o = options();
  o.progress = [&](const std::string& line) { progress.push_back(line); };
  Profiler profiler(o);
  const std::string file = std::string(WAVECAST_SAMPLES_DIR) + "/small_cnn.py";
  const Trace trace = expectTrace(profiler.trace(request(file)));
  EXPECT_EQ(trace.batchSize, 4);
  EXPECT_EQ(trace.mode, TraceMode::Shape);
  EXPECT_EQ(trace.entryFile, file);
  EXPECT_EQ(countOps(trace, "aten::convolution", Phase::Forward), 3u);
  EXPECT_EQ(countOps(trace, "aten::convolution_backward", Phase::Backward), 3u);
  for (const auto& op : trace.ops) {
    if (op.name == "aten::convolution_backward") {
      ASSERT_TRUE(op.forwardId.has_value());
      const OpRecord& forward = trace.ops.at(static_cast<size_t>(*op.forwardId));
      EXPECT_EQ(forward.name, "aten::convolution");
      EXPECT_EQ(op.loc.line, forward.loc.line);
    }
    if (op.phase == Phase::Optimizer) {
      EXPECT_EQ(op.loc.file, file);
    }
  }
  const auto first = std::find_if(trace.ops.begin(), trace.ops.end(), [](const OpRecord& op) {
    return op.name == "aten::convolution";
  });
  ASSERT_NE(first, trace.ops.end());
  EXPECT_EQ(first->module, "conv1");
  EXPECT_EQ(first->input(0)->shape, (std::vector<int64_t>{4, 3, 32, 32}));
  EXPECT_EQ(first->intListArg("padding"), (std::vector<int64_t>{1, 1}));
  EXPECT_GT(trace.memory.parametersBytes, 0);
  EXPECT_EQ(progress.front(), "starting worker");
  EXPECT_NE(std::find(progress.begin(), progress.end(), "tracing backward"), progress.end());
}

TEST(Profiler, MissingProviderSaysWhatToWrite) {
  Profiler profiler(options());
  const ProfileError e = expectError(profiler.trace(request(fixture("no_providers.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::MissingProvider);
  EXPECT_EQ(e.file, fixture("no_providers.py"));
  EXPECT_NE(e.hint.find("def wavecast_model"), std::string::npos);
  expectNextTraceWorks(profiler);
}

TEST(Profiler, MisspelledProviderPointsAtItsLine) {
  Profiler profiler(options());
  const ProfileError e = expectError(profiler.trace(request(fixture("misspelled_provider.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::MissingProvider);
  EXPECT_EQ(e.line, 4);
  EXPECT_NE(e.message.find("wavecast_modle"), std::string::npos);
}

TEST(Profiler, WrongSignatureIsReportedAtTheDefinition) {
  Profiler profiler(options());
  const ProfileError e = expectError(profiler.trace(request(fixture("wrong_signature.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::BadProviderSignature);
  EXPECT_EQ(e.line, 8);
  EXPECT_NE(e.message.find("batch_size"), std::string::npos);
  expectNextTraceWorks(profiler);
}

TEST(Profiler, SyntaxErrorHasItsLine) {
  Profiler profiler(options());
  const ProfileError e = expectError(profiler.trace(request(fixture("syntax_error.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::SyntaxError);
  EXPECT_EQ(e.file, fixture("syntax_error.py"));
  EXPECT_EQ(e.line, 9);
  expectNextTraceWorks(profiler);
}

TEST(Profiler, UserExceptionNamesTheDeepestProjectFrame) {
  Profiler profiler(options());
  const ProfileError e = expectError(profiler.trace(request(fixture("raises.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::UserException);
  EXPECT_NE(e.message.find("ValueError: scale factor missing"), std::string::npos);
  EXPECT_EQ(e.file, fixture("raises_helper.py"));
  EXPECT_EQ(e.line, 14);
  EXPECT_NE(e.traceback.find("Traceback"), std::string::npos);
  expectNextTraceWorks(profiler);
}

TEST(Profiler, EndlessLoopTimesOutAtItsLine) {
  Profiler profiler(options());
  ASSERT_FALSE(profiler.start().has_value());
  const ProfileError e = expectError(profiler.trace(request(fixture("endless_loop.py"), 3s)));
  EXPECT_EQ(e.kind, ProfileErrorKind::Timeout);
  EXPECT_EQ(e.file, fixture("endless_loop.py"));
  EXPECT_GE(e.line, 15);
  EXPECT_LE(e.line, 16);
  expectNextTraceWorks(profiler);
}

TEST(Profiler, SegfaultIsAWorkerCrashWithItsLine) {
  Profiler profiler(options());
  const ProfileError e = expectError(profiler.trace(request(fixture("segfault.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::WorkerCrashed);
  EXPECT_NE(e.message.find("SIGSEGV"), std::string::npos);
  EXPECT_EQ(e.file, fixture("segfault.py"));
  EXPECT_EQ(e.line, 16);
  EXPECT_EQ(profiler.workerPid(), 0);
  expectNextTraceWorks(profiler);
}

// The script's sandbox folder is in the worker's scratch folder, which the profiler
// removes however the worker ends: one that crashed mid-trace cannot remove its own.
TEST(Profiler, WorkerFoldersGoHoweverTheWorkerEnds) {
  const fs::path temp = fs::temp_directory_path() / "wavecast-profiler-test-scratch";
  fs::remove_all(temp);
  fs::create_directory(temp);
  const char* before = std::getenv("TMPDIR");
  const std::string saved = before ? before : "";
  ::setenv("TMPDIR", temp.c_str(), 1);
  {
    Profiler profiler(options());
    const ProfileError e = expectError(profiler.trace(request(fixture("segfault.py"))));
    EXPECT_EQ(e.kind, ProfileErrorKind::WorkerCrashed);
    EXPECT_TRUE(fs::is_empty(temp)) << fs::begin(fs::recursive_directory_iterator(temp))->path();
    expectNextTraceWorks(profiler);
    // The live worker's scratch folder, its sandbox removed after the trace.
    ASSERT_EQ(std::distance(fs::directory_iterator(temp), fs::directory_iterator()), 1);
    EXPECT_EQ(fs::directory_iterator(temp)->path().filename().string().rfind("wavecast-worker-", 0),
              0u);
    EXPECT_TRUE(fs::is_empty(*fs::directory_iterator(temp)));
  }
  EXPECT_TRUE(fs::is_empty(temp));

  // A process killed with its worker (an editor that kills the daemon's process group)
  // removes nothing: its folders go when the next worker starts, a live process's stay.
  const pid_t ended = ::fork();
  if (ended == 0)
    ::_exit(0);
  ::waitpid(ended, nullptr, 0);
  const fs::path left = temp / ("wavecast-worker-" + std::to_string(ended) + "-abcdef");
  const fs::path alive = temp / "wavecast-worker-1-abcdef";
  fs::create_directories(left / "wavecast-script-abcdef");
  fs::create_directory(alive);
  {
    Profiler profiler(options());
    ASSERT_FALSE(profiler.start().has_value());
    EXPECT_FALSE(fs::exists(left));
    EXPECT_TRUE(fs::exists(alive));
  }
  fs::remove_all(alive);
  EXPECT_TRUE(fs::is_empty(temp));
  if (before)
    ::setenv("TMPDIR", saved.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  fs::remove_all(temp);
}

TEST(Profiler, ExitInUserCodeIsAWorkerCrash) {
  Profiler profiler(options());
  const ProfileError e = expectError(profiler.trace(request(fixture("exits.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::WorkerCrashed);
  EXPECT_NE(e.message.find("status 3"), std::string::npos);
  expectNextTraceWorks(profiler);
}

TEST(Profiler, MemoryErrorIsOutOfMemory) {
  Profiler profiler(options());
  const ProfileError e = expectError(profiler.trace(request(fixture("memory_error.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::OutOfMemory);
  EXPECT_EQ(e.file, fixture("memory_error.py"));
  EXPECT_EQ(e.line, 5);
  expectNextTraceWorks(profiler);
}

TEST(Profiler, AddressSpaceLimitTurnsLargeAllocationsIntoOutOfMemory) {
  ProfilerOptions o = options();
  o.memoryLimitBytes = uint64_t{6} << 30;
  Profiler profiler(o);
  TraceRequest r = request(fixture("big_allocation.py"));
  r.mode = TraceMode::Cpu; // real tensors: the 8 GiB allocation is attempted
  const ProfileError e = expectError(profiler.trace(r));
  EXPECT_EQ(e.kind, ProfileErrorKind::OutOfMemory);
  EXPECT_EQ(e.file, fixture("big_allocation.py"));
  EXPECT_EQ(e.line, 14);
  expectNextTraceWorks(profiler);
}

// The daemon starts the worker when it initializes; the first trace uses that worker.
TEST(Profiler, PrestartStartsTheWorkerTheFirstTraceUses) {
  Profiler profiler(options());
  profiler.prestart();
  const int pid = profiler.workerPid();
  EXPECT_NE(pid, 0);
  profiler.prestart(); // one worker is enough
  EXPECT_EQ(profiler.workerPid(), pid);
  expectNextTraceWorks(profiler);
  EXPECT_EQ(profiler.workerPid(), pid);
}

// The daemon's worker traces a small model while it waits for its first request
// (--warm-up): nothing of that trace may show in the next one.
TEST(Profiler, AWorkerThatWarmedUpTracesWhatAColdOneDoes) {
  ProfilerOptions warmOptions = options();
  warmOptions.warmUp = true;
  Profiler warm(warmOptions);
  Profiler cold(options());
  const TraceRequest r = request(std::string(WAVECAST_SAMPLES_DIR) + "/small_transformer.py");
  const Trace warmed = expectTrace(warm.trace(r));
  const Trace fresh = expectTrace(cold.trace(r));
  ASSERT_EQ(warmed.ops.size(), fresh.ops.size());
  for (size_t i = 0; i < fresh.ops.size(); ++i) {
    EXPECT_EQ(warmed.ops[i].name, fresh.ops[i].name) << "op " << i;
    EXPECT_EQ(warmed.ops[i].phase, fresh.ops[i].phase) << "op " << i;
    EXPECT_EQ(warmed.ops[i].loc.line, fresh.ops[i].loc.line) << "op " << i;
    EXPECT_EQ(warmed.ops[i].module, fresh.ops[i].module) << "op " << i;
  }
  EXPECT_EQ(warmed.memory.peakLiveBytes, fresh.memory.peakLiveBytes);
  EXPECT_EQ(warmed.memory.optimizerStateBytes, fresh.memory.optimizerStateBytes);
  EXPECT_EQ(warmed.warnings.size(), fresh.warnings.size());
}

// The script is interrupted where it is; the worker answers and stays, warm.
TEST(Profiler, CancelStopsARunningTraceAndKeepsTheWorker) {
  Profiler profiler(options());
  ASSERT_FALSE(profiler.start().has_value());
  const int worker = profiler.workerPid();
  std::thread canceller([&] {
    std::this_thread::sleep_for(1s);
    profiler.cancel();
  });
  const auto started = std::chrono::steady_clock::now();
  const ProfileError e = expectError(profiler.trace(request(fixture("endless_loop.py"))));
  canceller.join();
  EXPECT_EQ(e.kind, ProfileErrorKind::Cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  EXPECT_EQ(profiler.workerPid(), worker);
  expectNextTraceWorks(profiler);
  EXPECT_EQ(profiler.workerPid(), worker);
}

TEST(Profiler, CancelReplacesAWorkerThatDoesNotStop) {
  Profiler profiler(options());
  ASSERT_FALSE(profiler.start().has_value());
  const int busy = profiler.workerPid();
  std::thread canceller([&] {
    std::this_thread::sleep_for(1s);
    profiler.cancel();
  });
  const auto started = std::chrono::steady_clock::now();
  const ProfileError e = expectError(profiler.trace(request(fixture("ignores_interrupts.py"))));
  canceller.join();
  EXPECT_EQ(e.kind, ProfileErrorKind::Cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  // The stuck worker is gone and its replacement is already starting.
  EXPECT_NE(profiler.workerPid(), 0);
  EXPECT_NE(profiler.workerPid(), busy);
  EXPECT_NE(::kill(busy, 0), 0);
  // Cancelled again while that replacement starts: it holds nothing stale, so it stays.
  const int replacement = profiler.workerPid();
  std::thread again([&] {
    std::this_thread::sleep_for(100ms);
    profiler.cancel();
  });
  const auto waited = profiler.start();
  again.join();
  ASSERT_TRUE(waited.has_value());
  EXPECT_EQ(waited->kind, ProfileErrorKind::Cancelled);
  EXPECT_EQ(profiler.workerPid(), replacement);
  expectNextTraceWorks(profiler);
}

// A job's token cancelled before its trace begins: nothing is sent to the
// worker, which stays (it holds nothing stale), and the next trace works.
TEST(Profiler, ATokenCancelledBeforeTheTraceBeginsIsNotLost) {
  Profiler profiler(options());
  ASSERT_FALSE(profiler.start().has_value());
  const int worker = profiler.workerPid();
  CancelToken cancel;
  cancel.cancel();
  const auto started = std::chrono::steady_clock::now();
  const ProfileError e = expectError(profiler.trace(request(fixture("endless_loop.py")), cancel));
  EXPECT_EQ(e.kind, ProfileErrorKind::Cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
  EXPECT_EQ(profiler.workerPid(), worker);
  expectNextTraceWorks(profiler);
}

TEST(Profiler, UserPrintsDoNotCorruptTheChannel) {
  Profiler profiler(options());
  const Trace trace = expectTrace(profiler.trace(request(fixture("prints.py"))));
  EXPECT_EQ(countOps(trace, "aten::addmm", Phase::Forward), 1u);
  EXPECT_GT(countOps(trace, "aten::add_", Phase::Optimizer), 0u);
}

TEST(Profiler, TheRequestsWorldSizeIsTheScriptsTorchrunEnvironment) {
  Profiler profiler(options());
  TraceRequest sized = request(fixture("world_size.py"));
  sized.worldSize = 3;
  const Trace three = expectTrace(profiler.trace(sized));
  ASSERT_FALSE(three.ops.empty());
  EXPECT_EQ(three.ops[0].inputs[0]->shape, (std::vector<int64_t>{4, 3}));
  const Trace unsized = expectTrace(profiler.trace(request(fixture("world_size.py"))));
  ASSERT_FALSE(unsized.ops.empty());
  // No world size asked for and no process group made: no torchrun variables.
  EXPECT_EQ(unsized.ops[0].inputs[0]->shape, (std::vector<int64_t>{4, 1}));
}

TEST(Profiler, EditedHelperModuleIsReloaded) {
  const fs::path dir = fs::temp_directory_path() / ("wavecast-purge-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto writeHelper = [&](int width) {
    std::ofstream(dir / "helper.py") << "WIDTH = " << width << "\n";
  };
  std::ofstream(dir / "entry.py") << "import torch\n"
                                     "import helper\n\n\n"
                                     "def wavecast_model():\n"
                                     "    return torch.nn.Linear(8, helper.WIDTH)\n\n\n"
                                     "def wavecast_input(batch_size=2):\n"
                                     "    return (torch.randn(batch_size, 8),)\n\n\n"
                                     "def wavecast_iteration(model):\n"
                                     "    return lambda x: model(x).sum().backward()\n";
  Profiler profiler(options());
  const auto widthOfLinear = [&]() -> int64_t {
    const Trace trace = expectTrace(profiler.trace(request((dir / "entry.py").string())));
    for (const auto& op : trace.ops)
      if (op.name == "aten::addmm" && op.phase == Phase::Forward)
        return op.output(0)->shape.at(1);
    return -1;
  };
  writeHelper(16);
  EXPECT_EQ(widthOfLinear(), 16);
  writeHelper(32);
  EXPECT_EQ(widthOfLinear(), 32);
  fs::remove_all(dir);
}

TEST(Profiler, MissingWorkerIsAnEnvironmentError) {
  ProfilerOptions o = options();
  o.workerPath = "/nonexistent/wavecast-worker";
  Profiler profiler(o);
  const ProfileError e = expectError(profiler.trace(request(fixture("prints.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::EnvironmentError);
  EXPECT_NE(e.message.find("/nonexistent/wavecast-worker"), std::string::npos);
}

TEST(Profiler, VenvWithAnotherPythonIsRefused) {
  const fs::path env = fs::temp_directory_path() / ("wavecast-venv-" + std::to_string(::getpid()));
  fs::create_directories(env / "lib" / "python3.99" / "site-packages");
  ProfilerOptions o = options();
  o.pythonEnv = env.string();
  Profiler profiler(o);
  const ProfileError e = expectError(profiler.trace(request(fixture("prints.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::EnvironmentError);
  EXPECT_NE(e.message.find("python3.99"), std::string::npos);
  fs::remove_all(env);
}

// A fake venv of the worker's Python version; `systemPackages` is what its
// pyvenv.cfg says about seeing the system's packages (Debian's torch here).
fs::path makeVenv(const std::string& name, bool systemPackages) {
  const fs::path env = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  fs::create_directories(env / "lib" / ("python" WAVECAST_PYTHON_VERSION) / "site-packages");
  std::ofstream(env / "pyvenv.cfg")
      << "home = /usr/bin\ninclude-system-site-packages = " << (systemPackages ? "true" : "false")
      << "\n";
  return env;
}

fs::path sitePackages(const fs::path& env) {
  return env / "lib" / ("python" WAVECAST_PYTHON_VERSION) / "site-packages";
}

TEST(Profiler, VenvWithoutTorchSaysSo) {
  const fs::path env = makeVenv("wavecast-venv-empty", false);
  ProfilerOptions o = options();
  o.pythonEnv = env.string();
  Profiler profiler(o);
  const ProfileError e = expectError(profiler.trace(request(fixture("prints.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::EnvironmentError);
  EXPECT_EQ(e.message, "the Python environment " + env.string() + " has no torch");
  EXPECT_NE(e.hint.find(env.string() + "/bin/pip install torch"), std::string::npos);
  fs::remove_all(env);
}

TEST(Profiler, IsolatedVenvSeesOnlyItsOwnTorch) {
  // The venv's own (too old) torch must be the one imported, not the system's.
  const fs::path env = makeVenv("wavecast-venv-old-torch", false);
  fs::create_directories(sitePackages(env) / "torch");
  std::ofstream(sitePackages(env) / "torch" / "__init__.py") << "__version__ = '1.12.1'\n";
  ProfilerOptions o = options();
  o.pythonEnv = env.string();
  Profiler profiler(o);
  const ProfileError e = expectError(profiler.trace(request(fixture("prints.py"))));
  EXPECT_EQ(e.kind, ProfileErrorKind::EnvironmentError);
  EXPECT_EQ(e.message, "torch 1.12.1 in " + sitePackages(env).string() +
                           " is older than 1.13, the oldest wavecast traces with");
  fs::remove_all(env);
}

TEST(Profiler, DefaultEnvironmentAndTheSystemKeyword) {
  ProfilerOptions o = options();
  o.defaultPythonEnv = "/nonexistent/python-env";
  {
    Profiler profiler(o); // no setting: the default environment
    const ProfileError e = expectError(profiler.trace(request(fixture("prints.py"))));
    EXPECT_EQ(e.kind, ProfileErrorKind::EnvironmentError);
    EXPECT_NE(e.message.find("/nonexistent/python-env"), std::string::npos);
  }
  o.pythonEnv = kSystemPythonEnv; // the interpreter's own packages
  Profiler profiler(o);
  const Trace trace = expectTrace(profiler.trace(request(fixture("prints.py"))));
  EXPECT_EQ(trace.pythonEnv, kSystemPythonEnv) << "the trace names the environment that traced";
  EXPECT_FALSE(trace.torchVersion.empty());
}

TEST(Profiler, AConfiguredEnvironmentMissingHereIsNamedNeverReplacedSilently) {
  // An installation whose build-time venv is absent (a .deb on another machine) and no
  // environment chosen: the system's torch would trace other ops; say so instead.
  ProfilerOptions o = options();
  o.defaultPythonEnv.clear();
  o.missingPythonEnv = "/build/machine/python-env";
  {
    Profiler profiler(o);
    const ProfileError e = expectError(profiler.trace(request(fixture("prints.py"))));
    EXPECT_EQ(e.kind, ProfileErrorKind::EnvironmentError);
    EXPECT_EQ(e.message, "the Python environment wavecast was set up with, "
                         "/build/machine/python-env, is not on this machine");
    EXPECT_NE(e.hint.find("--python-env VENV"), std::string::npos) << e.hint;
    EXPECT_NE(e.hint.find("--python-env system"), std::string::npos) << e.hint;
  }
  o.pythonEnv = kSystemPythonEnv; // asked for: the system's packages
  Profiler profiler(o);
  expectTrace(profiler.trace(request(fixture("prints.py"))));
}

TEST(Profiler, VenvSitePackagesComeFirst) {
  // A venv of the same Python version whose site-packages shadows a module the script imports.
  const fs::path env = makeVenv("wavecast-venv-ok", true);
  const fs::path site = sitePackages(env);
  std::ofstream(site / "wavecast_venv_probe.py") << "WIDTH = 24\n";
  const fs::path project = env / "project";
  fs::create_directories(project);
  std::ofstream(project / "entry.py")
      << "import torch\nimport wavecast_venv_probe\n\n\n"
         "def wavecast_model():\n"
         "    return torch.nn.Linear(8, wavecast_venv_probe.WIDTH)\n\n\n"
         "def wavecast_input(batch_size=2):\n"
         "    return (torch.randn(batch_size, 8),)\n\n\n"
         "def wavecast_iteration(model):\n"
         "    return lambda x: model(x).sum().backward()\n";
  ProfilerOptions o = options();
  o.pythonEnv = env.string();
  Profiler profiler(o);
  const Trace trace = expectTrace(profiler.trace(request((project / "entry.py").string())));
  EXPECT_EQ(countOps(trace, "aten::addmm", Phase::Forward), 1u);
  fs::remove_all(env);
}

} // namespace
} // namespace wavecast
