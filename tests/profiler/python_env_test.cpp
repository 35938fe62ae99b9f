// The worker's Python environment: what --python-env may name (a venv folder
// or its bin/python), and environments that cannot trace, each one error
// naming the environment and the fix, after which the next trace works.
#include "python_environment.h"
#include "trace_results.h"
#include "wavecast/profiler/profiler.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

namespace wavecast {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using worker::PythonEnvironment;
using worker::PythonEnvironmentError;
using worker::resolvePythonEnvironment;

const std::string kOurs = WAVECAST_PYTHON_VERSION;

// A folder under the temporary directory, removed with the test.
class TempDir {
public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

private:
  fs::path path_;
};

fs::path sitePackages(const fs::path& env, const std::string& version = kOurs) {
  return env / "lib" / ("python" + version) / "site-packages";
}

// A venv as `python3.X -m venv` makes it: bin/python links to the system
// interpreter, so the venv is only found from the path as given.
fs::path makeVenv(const fs::path& env, bool systemPackages, const std::string& version = kOurs) {
  fs::create_directories(sitePackages(env, version));
  fs::create_directories(env / "bin");
  fs::create_symlink(WAVECAST_EMBEDDED_PYTHON, env / "bin" / "python3");
  fs::create_symlink("python3", env / "bin" / "python");
  std::ofstream(env / "pyvenv.cfg")
      << "home = /usr/bin\ninclude-system-site-packages = " << (systemPackages ? "true" : "false")
      << "\n";
  return env;
}

PythonEnvironment expectEnvironment(const std::string& given) {
  auto resolved = resolvePythonEnvironment(given, kOurs, WAVECAST_EMBEDDED_PYTHON);
  if (auto* error = std::get_if<PythonEnvironmentError>(&resolved)) {
    ADD_FAILURE() << given << ": " << error->message;
    return {};
  }
  return std::get<PythonEnvironment>(resolved);
}

PythonEnvironmentError expectRefused(const std::string& given) {
  auto resolved = resolvePythonEnvironment(given, kOurs, WAVECAST_EMBEDDED_PYTHON);
  if (auto* error = std::get_if<PythonEnvironmentError>(&resolved))
    return *error;
  ADD_FAILURE() << given << " was accepted";
  return {};
}

TEST(PythonEnvironment, AVenvFolderOrItsPythonNamesTheVenv) {
  TempDir dir("wavecast-env-venv");
  const fs::path env = makeVenv(dir.path() / "venv", false);
  for (const fs::path& given : {env, env / "bin" / "python", env / "bin" / "python3"}) {
    const PythonEnvironment resolved = expectEnvironment(given.string());
    EXPECT_EQ(resolved.root, env) << given; // not /usr, where the link leads
    EXPECT_EQ(resolved.sitePackages, sitePackages(env)) << given;
    EXPECT_FALSE(resolved.seesSystemPackages) << given;
  }
  EXPECT_EQ(expectEnvironment((env / "bin" / ".." / "bin" / "python").string()).root, env);
}

TEST(PythonEnvironment, ALinkToAVenvsPythonNamesThatVenv) {
  // ~/bin/python-project -> VENV/bin/python -> python3 -> /usr/bin/python3.X:
  // the first venv met on the way, not the system interpreter at the end.
  TempDir dir("wavecast-env-link");
  const fs::path env = makeVenv(dir.path() / "venv", true);
  fs::create_directories(dir.path() / "links");
  fs::create_symlink(env / "bin" / "python", dir.path() / "links" / "python-project");
  const PythonEnvironment resolved =
      expectEnvironment((dir.path() / "links" / "python-project").string());
  EXPECT_EQ(resolved.root, env);
  EXPECT_TRUE(resolved.seesSystemPackages);
}

TEST(PythonEnvironment, TheEmbeddedInterpreterMeansItsOwnPackages) {
  const PythonEnvironment resolved = expectEnvironment(WAVECAST_EMBEDDED_PYTHON);
  EXPECT_TRUE(resolved.root.empty());
  EXPECT_TRUE(resolved.sitePackages.empty());
  EXPECT_TRUE(resolved.seesSystemPackages);
}

TEST(PythonEnvironment, AnotherPythonVersionIsRefusedWithWhatToDo) {
  TempDir dir("wavecast-env-other");
  const fs::path venv = makeVenv(dir.path() / "venv312", false, "3.99");
  const PythonEnvironmentError fromVenv = expectRefused((venv / "bin" / "python").string());
  EXPECT_EQ(fromVenv.message, "the Python environment " + venv.string() +
                                  " uses python3.99, but wavecast's worker embeds python" + kOurs);
  EXPECT_NE(fromVenv.hint.find("python" + kOurs + " -m venv DIR"), std::string::npos);

  // A bare interpreter of another version, e.g. pyenv's or /usr/bin/python3.99.
  const fs::path prefix = dir.path() / "prefix";
  fs::create_directories(prefix / "bin");
  std::ofstream(prefix / "bin" / "python3.99") << "";
  fs::create_symlink("python3.99", prefix / "bin" / "python3");
  for (const std::string name : {"python3.99", "python3"}) {
    const PythonEnvironmentError bare = expectRefused((prefix / "bin" / name).string());
    EXPECT_EQ(bare.message, (prefix / "bin" / name).string() +
                                " is Python 3.99, but wavecast's worker embeds Python " + kOurs);
  }
}

TEST(PythonEnvironment, NeitherAFolderNorAPythonIsRefused) {
  TempDir dir("wavecast-env-bad");
  EXPECT_EQ(expectRefused((dir.path() / "missing").string()).message,
            "the Python environment " + (dir.path() / "missing").string() + " does not exist");
  const fs::path env = makeVenv(dir.path() / "venv", false);
  std::ofstream(env / "bin" / "activate") << "";
  EXPECT_EQ(expectRefused((env / "bin" / "activate").string()).message,
            (env / "bin" / "activate").string() +
                " is neither a Python environment's folder nor its bin/python");
  fs::create_directories(dir.path() / "empty");
  EXPECT_EQ(expectRefused((dir.path() / "empty").string()).message,
            (dir.path() / "empty").string() +
                " is not a Python virtual environment (no lib/python" + kOurs + "/site-packages)");
}

// --- the real worker -------------------------------------------------------

ProfilerOptions options(const fs::path& env) {
  ProfilerOptions o;
  o.workerPath = WAVECAST_WORKER_PATH;
  o.pythonPath = WAVECAST_TRACER_PYTHON_DIR;
  if (!env.empty())
    o.pythonEnv = env.string();
  return o;
}

using testing::expectError;
using testing::expectTrace;
using testing::request;

void expectNextTraceWorks(Profiler& profiler) {
  const Trace trace =
      expectTrace(profiler.trace(request(fs::path(WAVECAST_SAMPLES_DIR) / "small_cnn.py")));
  EXPECT_FALSE(trace.ops.empty());
}

void writeEntry(const fs::path& file, const std::string& imports) {
  std::ofstream(file) << "import torch\n"
                      << imports
                      << "\n\n"
                         "def wavecast_model():\n"
                         "    return torch.nn.Linear(8, 24)\n\n\n"
                         "def wavecast_input(batch_size=2):\n"
                         "    return (torch.randn(batch_size, 8),)\n\n\n"
                         "def wavecast_iteration(model):\n"
                         "    return lambda x: model(x).sum().backward()\n";
}

TEST(PythonEnvironment, TheWorkerTracesWithAVenvGivenAsItsPython) {
  // A module only the venv has: importing it proves its site-packages are used.
  TempDir dir("wavecast-env-trace");
  const fs::path env = makeVenv(dir.path() / "venv", true);
  std::ofstream(sitePackages(env) / "wavecast_venv_probe.py") << "WIDTH = 24\n";
  writeEntry(dir.path() / "entry.py", "import wavecast_venv_probe\n");
  Profiler profiler(options(env / "bin" / "python"));
  expectTrace(profiler.trace(request(dir.path() / "entry.py")));

  Profiler isolated(options(makeVenv(dir.path() / "isolated", false) / "bin" / "python"));
  const ProfileError e = expectError(isolated.trace(request(dir.path() / "entry.py")));
  EXPECT_EQ(e.message,
            "the Python environment " + (dir.path() / "isolated").string() + " has no torch");
  EXPECT_NE(e.hint.find((dir.path() / "isolated" / "bin" / "pip").string() + " install torch"),
            std::string::npos)
      << e.hint;

  // A venv that reaches another's torch through a .pth file has torch.
  const fs::path layered = makeVenv(dir.path() / "layered", false);
  std::ofstream(sitePackages(layered) / "system_torch.pth") << "/usr/lib/python3/dist-packages\n";
  writeEntry(dir.path() / "plain.py", "");
  Profiler throughPth(options(layered / "bin" / "python"));
  expectTrace(throughPth.trace(request(dir.path() / "plain.py")));
}

TEST(PythonEnvironment, AModelImportingAMissingPackageNamesTheEnvironmentAndThePip) {
  TempDir dir("wavecast-env-missing");
  const fs::path env = makeVenv(dir.path() / "venv", true);
  writeEntry(dir.path() / "entry.py", "import wavecast_absent_package.models\n");
  Profiler profiler(options(env));
  const ProfileError e = expectError(profiler.trace(request(dir.path() / "entry.py")));
  EXPECT_EQ(e.kind, ProfileErrorKind::ImportError);
  EXPECT_EQ(e.message,
            "No module named 'wavecast_absent_package' in the Python environment " + env.string());
  EXPECT_EQ(e.hint, "Install it there (" + (env / "bin" / "pip").string() +
                        " install wavecast_absent_package), or select a Python environment "
                        "that has it.");
  EXPECT_EQ(e.line, 2);
  expectNextTraceWorks(profiler);

  // Without a venv the fix is one to make.
  Profiler system(options({}));
  const ProfileError s = expectError(system.trace(request(dir.path() / "entry.py")));
  EXPECT_NE(s.message.find("in the system Python ("), std::string::npos) << s.message;
  EXPECT_NE(s.hint.find("python" + kOurs +
                        " -m venv VENV && VENV/bin/pip install "
                        "wavecast_absent_package"),
            std::string::npos)
      << s.hint;
  expectNextTraceWorks(system);
}

// A venv whose torch package only has `_C` as `core` (a file name) and imports it as torch does.
fs::path venvWithBrokenTorch(const fs::path& env, const fs::path& core, const std::string& name) {
  makeVenv(env, true); // a broken torch of its own hides the system's
  const fs::path torch = sitePackages(env) / "torch";
  fs::create_directories(torch);
  std::ofstream(torch / "__init__.py") << "from torch._C import *  # noqa: F403\n";
  if (core.empty())
    std::ofstream(torch / name) << "";
  else
    fs::copy_file(core, torch / name);
  return torch;
}

TEST(PythonEnvironment, TorchBuiltForAnotherPythonNamesTheEnvironmentAndTheFix) {
  TempDir dir("wavecast-env-torch-abi");
  const fs::path env = dir.path() / "venv";
  const fs::path torch = venvWithBrokenTorch(env, {}, "_C.cpython-399-x86_64-linux-gnu.so");
  Profiler profiler(options(env / "bin" / "python"));
  for (int attempt = 0; attempt < 2; ++attempt) { // the same error again, not a hang or a crash
    const ProfileError e =
        expectError(profiler.trace(request(fs::path(WAVECAST_SAMPLES_DIR) / "small_cnn.py")));
    EXPECT_EQ(e.kind, ProfileErrorKind::EnvironmentError);
    EXPECT_EQ(e.message, "torch in " + torch.string() +
                             " was built for Python 3.99, but wavecast's worker runs Python " +
                             kOurs + " (" + env.string() + ")");
    EXPECT_EQ(e.hint, "Reinstall it for Python " + kOurs + " (" + (env / "bin" / "pip").string() +
                          " install --force-reinstall torch), or select a Python environment "
                          "that has it.");
  }
  fs::remove_all(torch); // fixed: the system's torch shows through again
  expectNextTraceWorks(profiler);
}

TEST(PythonEnvironment, TorchWithAnUndefinedSymbolNamesTheEnvironmentAndTheFix) {
  TempDir dir("wavecast-env-torch-symbol");
  const fs::path env = dir.path() / "venv";
  const fs::path torch =
      venvWithBrokenTorch(env, WAVECAST_FAKE_TORCH_CORE, "_C" WAVECAST_PYTHON_EXT_SUFFIX);
  Profiler profiler(options(env));
  const ProfileError e =
      expectError(profiler.trace(request(fs::path(WAVECAST_SAMPLES_DIR) / "small_cnn.py")));
  EXPECT_EQ(e.kind, ProfileErrorKind::EnvironmentError);
  EXPECT_EQ(e.message.rfind(
                "torch in " + torch.string() + " does not load with Python " + kOurs + ": ", 0),
            0u)
      << e.message;
  EXPECT_NE(e.message.find("undefined symbol: wavecast_symbol_of_another_python"),
            std::string::npos)
      << e.message;
  EXPECT_NE(e.hint.find((env / "bin" / "pip").string() + " install --force-reinstall torch"),
            std::string::npos);
  fs::remove_all(torch);
  expectNextTraceWorks(profiler);
}

} // namespace
} // namespace wavecast
