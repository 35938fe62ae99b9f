// A test double for the Analyzer: analyses block until the test releases them,
// so tests can observe the server while an analysis runs.
#pragma once

#include "lsp/analyzer.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace wavecast::lsp::testing {

// A prediction for `file` on H100-SXM and T4 with ops on lines 3 and 5.
inline AnalysisOutput sampleOutput(const std::string& file, int64_t batchSize = 32) {
  AnalysisOutput output;
  Prediction& p = output.prediction;
  p.batchSize = batchSize;
  p.gpus = {"H100-SXM", "T4"};
  GpuSummary h100;
  h100.gpuId = "H100-SXM";
  h100.iterationMs = 10;
  h100.samplesPerSecond = 3200;
  h100.costPer1kSamplesUsd = 0.0123;
  h100.memory.weightsBytes = 2LL << 30;
  h100.memoryCapacityBytes = 80LL << 30;
  h100.methods.used[static_cast<size_t>(PredictionMethod::Roofline)] = true;
  GpuSummary t4 = h100;
  t4.gpuId = "T4";
  t4.iterationMs = 80;
  t4.samplesPerSecond = 400;
  t4.costPer1kSamplesUsd = 0.0021;
  t4.memoryCapacityBytes = 16LL << 30;
  p.summaries = {h100, t4};
  LineBreakdown conv;
  conv.loc = {file, 3, "forward"};
  // On the H100 the line's kernels take 0.3 of its 1.5 ms: the GPU waits for the CPU.
  const auto times = [](double forwardMs, double backwardMs, double optimizerMs, double share,
                        double gpuMs, double gpuIdleMs, bool hostBound) {
    LineTimes t;
    t.forwardMs = forwardMs;
    t.backwardMs = backwardMs;
    t.optimizerMs = optimizerMs;
    t.shareOfIteration = share;
    t.gpuMs = gpuMs;
    t.gpuIdleMs = gpuIdleMs;
    t.hostBound = hostBound;
    return t;
  };
  conv.perGpu = {times(0.5, 1.0, 0, 0.15, 0.3, 1.2, true),
                 times(4.0, 8.0, 0, 0.15, 12.0, 0, false)};
  conv.opNames = {"aten::convolution", "aten::relu"};
  conv.opCount = 3;
  LineBreakdown step = conv;
  step.loc.line = 5;
  step.perGpu = {times(0, 0, 0.2, 0.02, 0.2, 0, false), times(0, 0, 1.6, 0.02, 1.6, 0, false)};
  step.opNames = {"aten::add_"};
  step.opCount = 1;
  p.lines = {conv, step};
  // Its first op, in the per-op detail.
  p.opInfo = {{0, "aten::convolution", Phase::Forward, conv.loc, "conv", CostNote::None, 0.05}};
  p.ops = {{{0, CostFamily::Conv, PredictionMethod::Roofline, 0.3, 0.5}},
           {{0, CostFamily::Conv, PredictionMethod::Roofline, 2.4, 4.0}}};
  output.providerLines = {{Provider::Model, 1}, {Provider::Input, 7}, {Provider::Iteration, 9}};
  output.entryFile = file;
  output.torchVersion = "2.11.0+cu130";
  output.pythonEnv = "/venv";
  output.sourceFiles = {file};
  return output;
}

class FakeAnalyzer : public Analyzer {
public:
  FakeAnalyzer() {
    DeviceSpec h100;
    h100.id = "H100-SXM";
    h100.name = "NVIDIA H100 80GB HBM3";
    h100.computeCapabilityMajor = 9;
    h100.smCount = 132;
    h100.pricePerHourUsd = 4.0;
    DeviceSpec t4;
    t4.id = "T4";
    t4.name = "Tesla T4";
    t4.computeCapabilityMajor = 7;
    t4.computeCapabilityMinor = 5;
    t4.smCount = 40;
    gpus_ = {h100, t4};
  }

  AnalysisOutcome analyze(const AnalysisRequest& request, const ProgressCallback& progress,
                          const CancelToken& cancel) override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++entered_;
    changed_.notify_all();
    // Held here, the job is running in the scheduler's eyes but has not begun:
    // where the profiler used to reset its cancel flag.
    changed_.wait(lock, [&] { return !holdAtEntry_; });
    requests_.push_back(request);
    ++started_;
    changed_.notify_all();
    progress("tracing " + request.file);
    // The token has no way to wake us: look at it often.
    while (!changed_.wait_for(lock, std::chrono::milliseconds(1),
                              [&] { return releases_ > 0 || cancel.cancelled(); })) {
    }
    if (cancel.cancelled()) {
      ++cancelled_;
      changed_.notify_all();
      ProfileError error;
      error.kind = ProfileErrorKind::Cancelled;
      error.message = "cancelled";
      return error;
    }
    --releases_;
    ++finished_;
    changed_.notify_all();
    if (nextError_) {
      ProfileError error = *nextError_;
      nextError_.reset();
      return error;
    }
    if (output_)
      return *output_;
    AnalysisOutput output = sampleOutput(request.file, request.batchSize.value_or(32));
    if (store_ == Store::Full && request.traceSource != TraceSource::Worker)
      output.storedTraceRecorded = kStoredAt;
    if (store_ != Store::Full && request.traceSource == TraceSource::Store) {
      ProfileError none;
      none.kind = ProfileErrorKind::Cancelled;
      none.message = "no stored trace";
      return none;
    }
    if (!fits_) {
      const GpuSummary& t4 = output.prediction.summaries[1];
      output.prediction.summaries[1].fitsInMemory = false;
      output.prediction.advisories.push_back(
          {advisory::OutOfMemory{t4.gpuId, 20LL << 30, t4.memoryCapacityBytes}});
    }
    return output;
  }

  const std::vector<DeviceSpec>& gpus() const override { return gpus_; }

  std::vector<std::string> resolveTargets(const std::vector<std::string>& names) const override {
    std::vector<std::string> ids;
    for (const auto& name : names) {
      if (name == "H100" || name == "H100-SXM")
        ids.push_back("H100-SXM");
      else if (name == "T4" || name == "t4")
        ids.push_back("T4");
      else
        throw UnknownGpuError("unknown GPU '" + name + "'; did you mean H100-SXM?", {"H100-SXM"});
    }
    return ids;
  }
  std::vector<std::string> defaultTargets() const override { return {"H100-SXM", "T4"}; }
  // Every target an H100 node's layout, its words kept as they are; "bogus" is unknown.
  std::vector<LayoutTarget>
  resolveLayouts(const std::vector<protocol::ParallelTargetSetting>& targets) const override {
    std::vector<LayoutTarget> out;
    for (const auto& target : targets) {
      if (target.target.find("bogus") != std::string::npos)
        throw UnknownTargetError("cannot read the target '" + target.target + "'");
      LayoutTarget layout;
      layout.gpu = "H100-SXM";
      layout.system = target.system.empty() ? "HGX-H100" : target.system;
      layout.words = target.target;
      out.push_back(layout);
    }
    return out;
  }

  // Lets one blocked (or future) analysis finish.
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++releases_;
    changed_.notify_all();
  }
  void failNext(ProfileError error) {
    std::lock_guard<std::mutex> lock(mutex_);
    nextError_ = std::move(error);
  }
  // Every later analysis answers `output` (e.g. a real Predictor's).
  void setOutput(AnalysisOutput output) {
    std::lock_guard<std::mutex> lock(mutex_);
    output_ = std::move(output);
  }
  // No trace store; one without the script's trace; one with it, recorded at kStoredAt.
  enum class Store { None, Empty, Full };
  void setStore(Store store) {
    std::lock_guard<std::mutex> lock(mutex_);
    store_ = store;
  }
  static constexpr std::chrono::system_clock::time_point kStoredAt{std::chrono::hours(490000)};
  bool storesTraces() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return store_ != Store::None;
  }
  void setFits(bool fits) {
    std::lock_guard<std::mutex> lock(mutex_);
    fits_ = fits;
  }
  // Analyses stop on entry, before they start, until letEnter().
  void holdAtEntry() {
    std::lock_guard<std::mutex> lock(mutex_);
    holdAtEntry_ = true;
  }
  void letEnter() {
    std::lock_guard<std::mutex> lock(mutex_);
    holdAtEntry_ = false;
    changed_.notify_all();
  }
  bool waitEntered(int count, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return entered_ >= count; });
  }
  bool waitStarted(int count, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return started_ >= count; });
  }
  int started() {
    std::lock_guard<std::mutex> lock(mutex_);
    return started_;
  }
  int cancelled() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cancelled_;
  }
  int finished() {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_;
  }
  std::vector<AnalysisRequest> requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }
  void prepare(const std::string& pythonEnv) override {
    std::lock_guard<std::mutex> lock(mutex_);
    prepared_.push_back(pythonEnv);
  }
  // The Python environments prepare() was called with, in order.
  std::vector<std::string> prepared() {
    std::lock_guard<std::mutex> lock(mutex_);
    return prepared_;
  }

private:
  std::vector<DeviceSpec> gpus_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<AnalysisRequest> requests_;
  std::vector<std::string> prepared_;
  int entered_ = 0;
  int started_ = 0;
  int finished_ = 0;
  int cancelled_ = 0;
  int releases_ = 0;
  Store store_ = Store::None;
  bool holdAtEntry_ = false;
  bool fits_ = true;
  std::optional<ProfileError> nextError_;
  std::optional<AnalysisOutput> output_;
};

} // namespace wavecast::lsp::testing
