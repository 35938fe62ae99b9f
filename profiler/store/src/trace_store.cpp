#include "wavecast/profiler/trace_store.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace wavecast {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "wavecast-trace-store";
constexpr int kFormatVersion = 1;

} // namespace

std::vector<std::string> traceSourceFiles(const Trace& trace, const std::string& entryFile) {
  std::set<std::string> files{entryFile};
  for (const auto& op : trace.ops) {
    if (op.loc.valid())
      files.insert(op.loc.file);
    for (const auto& frame : op.stack)
      if (frame.valid())
        files.insert(frame.file);
  }
  return {files.begin(), files.end()};
}

TraceStore::TraceStore(fs::path folder, std::string version, TraceStoreLimits limits,
                       FileHasher hashFile)
    : folder_(std::move(folder)), version_(std::move(version)), limits_(limits),
      hashFile_(std::move(hashFile)) {}

TraceStore::~TraceStore() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable())
    writer_.join();
}

std::string TraceStore::key(const TraceRequest& request, const std::string& pythonEnv,
                            std::string_view entryText) {
  // One field per line, each named: no two requests write the same text.
  std::ostringstream key;
  key << "file " << request.file << "\ncontent " << contentHash(entryText) << "\nbatch "
      << (request.batchSize ? std::to_string(*request.batchSize) : "default") << "\nmode "
      << toString(request.mode) << "\nenv " << pythonEnv << "\npackages "
      << packagesStamp(pythonEnv) << "\nranks "
      << (request.worldSize ? std::to_string(*request.worldSize) : "default");
  for (const auto& word : request.scriptArgs)
    key << "\narg " << word;
  if (!request.workingDirectory.empty())
    key << "\ncwd " << request.workingDirectory;
  if (request.compile)
    key << "\ncompile " << toString(*request.compile);
  if (const auto& device = request.device)
    key << "\ndevice " << device->name << " " << device->memoryBytes << " "
        << device->capabilityMajor << "." << device->capabilityMinor << " "
        << device->multiprocessors << " " << device->l2CacheBytes;
  return key.str();
}

std::string TraceStore::packagesStamp(const std::string& pythonEnv) {
  std::error_code error;
  std::vector<fs::path> folders;
  // Each python3.X folder's site-packages (a venv, a prefix) or dist-packages (Debian's).
  const auto sitesUnder = [&](const fs::path& lib, const char* site) {
    for (const auto& entry : fs::directory_iterator(lib, error))
      if (entry.path().filename().string().rfind("python3", 0) == 0)
        folders.push_back(entry.path() / site);
  };
  if (pythonEnv.empty() || pythonEnv == kSystemPythonEnv) {
    folders.push_back("/usr/lib/python3/dist-packages"); // Debian's python3-* packages
    sitesUnder("/usr/local/lib", "dist-packages");
    if (const char* home = std::getenv("HOME"))
      sitesUnder(fs::path(home) / ".local" / "lib", "site-packages");
  } else {
    fs::path root = pythonEnv;
    if (!fs::is_directory(root, error)) // its bin/python
      root = root.parent_path().parent_path();
    sitesUnder(root / "lib", "site-packages");
  }
  std::sort(folders.begin(), folders.end());
  std::ostringstream stamp;
  for (const auto& folder : folders) {
    const auto changed = fs::last_write_time(folder, error);
    if (!error)
      stamp << folder.string() << "@" << changed.time_since_epoch().count() << " ";
  }
  return stamp.str();
}

fs::path TraceStore::pathOf(const std::string& key) const {
  return folder_ / (contentHash(key) + ".json");
}

std::optional<StoredTrace> TraceStore::load(const std::string& key) {
  const fs::path path = pathOf(key);
  const auto text = readFileBytes(path.string());
  if (!text)
    return std::nullopt;
  std::error_code ignored;
  try {
    const auto doc = nlohmann::json::parse(*text);
    // Another format, another wavecast, or another key that hashed alike: not this entry.
    if (doc.at("format") != kFormat || doc.at("version") != kFormatVersion ||
        doc.at("wavecast") != version_ || doc.at("key") != key) {
      fs::remove(path, ignored);
      return std::nullopt;
    }
    for (const auto& [source, hash] : doc.at("sources").items())
      if (hashFile_(source) != hash.get<std::string>())
        return std::nullopt; // stale; the next trace of this request replaces it
    StoredTrace stored{traceFromJson(doc.at("trace")),
                       std::chrono::system_clock::time_point(
                           std::chrono::seconds(doc.at("recorded").get<int64_t>()))};
    fs::last_write_time(path, fs::file_time_type::clock::now(), ignored); // recently used
    return stored;
  } catch (const std::exception&) {
    fs::remove(path, ignored); // unreadable: a torn write or another program's file
    return std::nullopt;
  }
}

bool TraceStore::save(const std::string& key, const Trace& trace, const std::string& entryFile,
                      std::string_view entryText, std::chrono::system_clock::time_point recorded) {
  // The entry changed while it was traced: the trace may be of either text.
  const std::string entryHash = contentHash(entryText);
  if (hashFile_(entryFile) != entryHash)
    return false;
  nlohmann::json sources = nlohmann::json::object();
  for (const auto& source : traceSourceFiles(trace, entryFile)) {
    const auto hash = source == entryFile ? entryHash : hashFile_(source);
    if (!hash)
      return false; // a file it ran is gone: nothing could tell when the entry goes stale
    sources[source] = *hash;
  }
  const nlohmann::json doc = {
      {"format", kFormat},
      {"version", kFormatVersion},
      {"wavecast", version_},
      {"key", key},
      {"recorded",
       std::chrono::duration_cast<std::chrono::seconds>(recorded.time_since_epoch()).count()},
      {"sources", std::move(sources)},
      {"trace", traceToJson(trace)}};
  std::error_code error;
  // Traces name the user's files and models: the folder is the user's alone.
  if (fs::create_directories(folder_, error))
    fs::permissions(folder_, fs::perms::owner_all, error);
  const fs::path path = pathOf(key);
  // Written aside and renamed over: a reader never sees half a file.
  const fs::path partial = path.string() + ".partial-" + std::to_string(::getpid());
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    if (!out)
      return false;
    out << doc.dump();
    if (!out.flush())
      return false;
  }
  fs::rename(partial, path, error);
  if (error) {
    fs::remove(partial, error);
    return false;
  }
  prune();
  return true;
}

void TraceStore::prune() {
  std::error_code error;
  struct Stored {
    fs::file_time_type used;
    uintmax_t bytes;
    fs::path path;
  };
  std::vector<Stored> entries;
  for (const auto& item : fs::directory_iterator(folder_, error))
    if (item.path().extension() == ".json")
      entries.push_back({item.last_write_time(error), item.file_size(error), item.path()});
  // The most recently used first; keep them while both limits allow.
  std::sort(entries.begin(), entries.end(),
            [](const Stored& a, const Stored& b) { return a.used > b.used; });
  uintmax_t bytes = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    bytes += entries[i].bytes;
    if (i > 0 && (i >= limits_.entries || bytes > limits_.bytes))
      fs::remove(entries[i].path, error);
  }
}

void TraceStore::saveLater(const std::string& key, std::shared_ptr<const Trace> trace,
                           std::string entryFile, std::string entryText) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A newer trace of the same request replaces one not yet written.
    queue_.erase(std::remove_if(queue_.begin(), queue_.end(),
                                [&](const PendingSave& pending) { return pending.key == key; }),
                 queue_.end());
    queue_.push_back({key, std::move(trace), std::move(entryFile), std::move(entryText),
                      std::chrono::system_clock::now()});
    if (!writer_.joinable())
      writer_ = std::thread([this] { run(); });
  }
  wake_.notify_all();
}

void TraceStore::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [&] { return queue_.empty() && !writing_; });
}

void TraceStore::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty())
      return; // stopping, everything written
    PendingSave next = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    save(next.key, *next.trace, next.entryFile, next.entryText, next.recorded);
    lock.lock();
    writing_ = false;
    wake_.notify_all();
  }
}

} // namespace wavecast
