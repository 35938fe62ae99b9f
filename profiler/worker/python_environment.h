// Which packages the worker imports, from what --python-env names: a virtual
// environment (or any prefix) folder, or a python executable in its bin/.
// Header-only and free of Python so the profiler tests can check it directly.
#pragma once

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
#include <variant>

namespace wavecast::worker {

struct PythonEnvironment {
  /// The environment's folder; empty: the embedded interpreter's own packages.
  std::filesystem::path root;
  /// root/lib/pythonX.Y/site-packages; empty with `root`.
  std::filesystem::path sitePackages;
  /// Whether the system's packages show through (pyvenv.cfg's
  /// include-system-site-packages); always true without `root`.
  bool seesSystemPackages = true;
};

struct PythonEnvironmentError {
  std::string message;
  std::string hint;
};

namespace detail {

inline std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  const auto last = text.find_last_not_of(" \t\r");
  return first == std::string::npos ? std::string() : text.substr(first, last - first + 1);
}

// "3.12" from a file name such as python3.12; nullopt for python, python3.
inline std::optional<std::string> versionInName(const std::string& name) {
  if (name.rfind("python", 0) != 0 || name.size() <= 6)
    return std::nullopt;
  const std::string version = name.substr(6);
  if (version.find('.') == std::string::npos)
    return std::nullopt;
  return version;
}

// Whether pyvenv.cfg lets the venv see the system's packages.
inline bool venvSeesSystemPackages(const std::filesystem::path& root) {
  std::ifstream cfg(root / "pyvenv.cfg");
  std::string line;
  while (std::getline(cfg, line)) {
    const auto equals = line.find('=');
    if (equals != std::string::npos &&
        trim(line.substr(0, equals)) == "include-system-site-packages")
      return trim(line.substr(equals + 1)) == "true";
  }
  return false;
}

} // namespace detail

/**
 * The venv whose bin/ holds `python` or a link on the way from it to the
 * interpreter, the first one met from the path as given; empty if none.
 */
inline std::filesystem::path venvOfPython(const std::filesystem::path& python) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path hop = python;
  for (int hops = 0; hops < 40; ++hops) {
    const fs::path bin = hop.parent_path();
    if (bin.filename() == "bin" && fs::exists(bin.parent_path() / "pyvenv.cfg", ec))
      return bin.parent_path();
    if (!fs::is_symlink(hop, ec))
      break;
    const fs::path target = fs::read_symlink(hop, ec);
    if (ec)
      break;
    hop = (target.is_absolute() ? target : bin / target).lexically_normal();
  }
  return {};
}

/**
 * Resolves `given` for an interpreter of version `ours` ("3.11") whose
 * executable is `embedded`. A venv's bin/python is a symlink to the system
 * interpreter, so the venv is found from the path as given, before the links
 * are followed; the final target only tells a bare interpreter's version, or
 * that it is the embedded one (then its own packages are meant).
 */
inline std::variant<PythonEnvironment, PythonEnvironmentError>
resolvePythonEnvironment(const std::string& given, const std::string& ours,
                         const std::filesystem::path& embedded) {
  namespace fs = std::filesystem;
  const std::string python = "python" + ours;
  const std::string createHint = "Create the venv with " + python + " (" + python +
                                 " -m venv DIR && DIR/bin/pip install torch) and select it, or "
                                 "clear the Python environment setting.";
  std::error_code ec;
  const fs::path path = fs::absolute(given, ec).lexically_normal();
  if (!fs::exists(path, ec))
    return PythonEnvironmentError{"the Python environment " + given + " does not exist",
                                  createHint};

  fs::path root = path;
  if (!fs::is_directory(path, ec)) {
    const std::string name = path.filename().string();
    if (name.rfind("python", 0) != 0)
      return PythonEnvironmentError{
          given + " is neither a Python environment's folder nor its bin/python", createHint};
    root = venvOfPython(path);
    if (root.empty()) {
      // A bare interpreter: the embedded one means its own packages.
      if (fs::equivalent(path, embedded, ec))
        return PythonEnvironment{};
      std::optional<std::string> version = detail::versionInName(name);
      if (!version)
        version = detail::versionInName(fs::canonical(path, ec).filename().string());
      if (version && *version != ours)
        return PythonEnvironmentError{given + " is Python " + *version +
                                          ", but wavecast's worker embeds Python " + ours,
                                      createHint};
      if (path.parent_path().filename() != "bin")
        return PythonEnvironmentError{
            given + " is neither a Python environment's folder nor its bin/python", createHint};
      root = path.parent_path().parent_path(); // a prefix such as a conda environment
    }
  }

  const fs::path site = root / "lib" / python / "site-packages";
  if (fs::is_directory(site, ec))
    return PythonEnvironment{root, site, detail::venvSeesSystemPackages(root)};
  for (const auto& entry : fs::directory_iterator(root / "lib", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("python3.", 0) == 0 && fs::is_directory(entry.path() / "site-packages", ec))
      return PythonEnvironmentError{"the Python environment " + root.string() + " uses " + name +
                                        ", but wavecast's worker embeds " + python,
                                    createHint};
  }
  return PythonEnvironmentError{root.string() + " is not a Python virtual environment (no lib/" +
                                    python + "/site-packages)",
                                createHint};
}

} // namespace wavecast::worker
