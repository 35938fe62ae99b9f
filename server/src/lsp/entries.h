// What the server knows about each document it analyses (one that defines the
// providers): the state of its analysis, its last result or error, and what
// the running analysis was requested with.
#pragma once

#include "lsp/indexed_result.h"
#include "wavecast/profiler/trace_job.h"
#include "wavecast/protocol/jsonrpc.h"
#include "wavecast/protocol/wavecast.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace wavecast::lsp {

using ClientId = int;

struct Entry {
  std::string path; // canonical
  protocol::ResultsState state = protocol::ResultsState::None;
  std::optional<int64_t> contentVersion;       // the document version `result` is for
  std::shared_ptr<const IndexedResult> result; // the last successful analysis
  std::optional<ProfileError> error;           // the last analysis failed
  std::optional<int64_t> batchSizeOverride;    // wavecast/setBatchSize
  // What the running (or last) analysis was requested with.
  std::optional<int64_t> versionAtRequest;
  std::string cacheKeyAtRequest;
  std::string textAtRequest; // the entry file: result lines number this text
  TraceSource sourceAtRequest = TraceSource::Worker;
  std::vector<std::pair<ClientId, protocol::Json>> waiters; // wavecast/analyze requests
};

using Entries = std::map<std::string, Entry>; // by uri

} // namespace wavecast::lsp
