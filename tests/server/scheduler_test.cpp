#include "fake_analyzer.h"
#include "lsp/scheduler.h"

#include <boost/asio/executor_work_guard.hpp>
#include <gtest/gtest.h>
#include <thread>

namespace wavecast::lsp {
namespace {

using namespace std::chrono_literals;

class SchedulerTest : public ::testing::Test {
protected:
  SchedulerTest()
      : work_(boost::asio::make_work_guard(io_)),
        scheduler_(io_, analyzer_,
                   {[this](const std::string& uri) { events_.push_back("started " + uri); },
                    [this](const std::string&, const std::string&) {},
                    [this](const std::string& uri, const AnalysisRequest& request,
                           AnalysisOutcome outcome) {
                      events_.push_back(
                          "finished " + uri + " batch " +
                          std::to_string(request.batchSize.value_or(0)) +
                          (std::holds_alternative<AnalysisOutput>(outcome) ? " ok" : " error"));
                    },
                    [this](const std::string& uri) { events_.push_back("cancelled " + uri); }}) {}

  // Runs the event loop until `done` or 5 s.
  bool runUntil(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < deadline)
      io_.run_for(2ms);
    return done();
  }
  bool waitStarted(int count) {
    return runUntil([&] { return analyzer_.started() >= count; });
  }
  bool has(const std::string& event) const {
    return std::find(events_.begin(), events_.end(), event) != events_.end();
  }
  static AnalysisRequest request(int batch) { return {"/w/train.py", batch, {"T4"}, ""}; }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  testing::FakeAnalyzer analyzer_;
  std::vector<std::string> events_;
  AnalysisScheduler scheduler_;
};

TEST_F(SchedulerTest, DebouncesRequestsForTheSameDocument) {
  analyzer_.release();
  scheduler_.schedule("a", request(1), 50ms);
  scheduler_.schedule("a", request(2), 50ms);
  scheduler_.schedule("a", request(3), 50ms);
  EXPECT_TRUE(scheduler_.pending("a"));
  ASSERT_TRUE(runUntil([&] { return has("finished a batch 3 ok"); }));
  EXPECT_EQ(analyzer_.started(), 1);
  EXPECT_EQ(analyzer_.requests().at(0).batchSize, 3);
  EXPECT_FALSE(scheduler_.pending("a"));
}

// A save is analysed without a debounce: a zero delay reaches the analysis thread
// without waiting for the io_context to run a timer.
TEST_F(SchedulerTest, AZeroDelayQueuesAtOnceWithoutATimer) {
  scheduler_.schedule("a", request(1), 0ms);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (analyzer_.started() < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms); // the io_context is not run meanwhile
  EXPECT_EQ(analyzer_.started(), 1);
  analyzer_.release();
  ASSERT_TRUE(runUntil([&] { return has("finished a batch 1 ok"); }));
}

TEST_F(SchedulerTest, ANewerRequestCancelsTheRunningAnalysis) {
  scheduler_.schedule("a", request(1), 0ms);
  ASSERT_TRUE(waitStarted(1));
  ASSERT_TRUE(runUntil([&] { return has("started a"); }));
  EXPECT_EQ(scheduler_.running(), "a");
  scheduler_.schedule("a", request(2), 0ms);
  ASSERT_TRUE(waitStarted(2));
  EXPECT_EQ(analyzer_.cancelled(), 1);
  analyzer_.release();
  ASSERT_TRUE(runUntil([&] { return has("finished a batch 2 ok"); }));
  EXPECT_FALSE(has("finished a batch 1 ok"));
  EXPECT_FALSE(has("finished a batch 1 error")); // the stale result is dropped
  EXPECT_FALSE(has("cancelled a"));              // a newer analysis replaced it
}

// The newer analysis can be over (a stored trace answers in milliseconds) before the io
// thread hears that the older one was cancelled: still no "cancelled".
TEST_F(SchedulerTest, ASupersededAnalysisIsNotReportedCancelledAfterItsSuccessorFinished) {
  scheduler_.schedule("a", request(1), 0ms);
  ASSERT_TRUE(waitStarted(1));
  scheduler_.schedule("a", request(2), 0ms);
  const auto waitWithoutTheIoThread = [&](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    return done();
  };
  ASSERT_TRUE(waitWithoutTheIoThread([&] { return analyzer_.started() >= 2; }));
  analyzer_.release();
  ASSERT_TRUE(waitWithoutTheIoThread([&] { return analyzer_.finished() >= 1; }));
  ASSERT_TRUE(runUntil([&] { return has("finished a batch 2 ok"); }));
  EXPECT_EQ(analyzer_.cancelled(), 1);
  EXPECT_FALSE(has("cancelled a"));
}

TEST_F(SchedulerTest, ANewerRequestCancelsAtOnceNotAfterItsDebounce) {
  scheduler_.schedule("a", request(1), 0ms);
  ASSERT_TRUE(waitStarted(1));
  scheduler_.schedule("a", request(2), 10s);
  ASSERT_TRUE(runUntil([&] { return analyzer_.cancelled() == 1; }));
  ASSERT_TRUE(runUntil([&] { return scheduler_.running() == std::nullopt; }));
  EXPECT_EQ(analyzer_.started(), 1);
  EXPECT_TRUE(scheduler_.pending("a")); // still debouncing the newer request
  EXPECT_FALSE(has("cancelled a"));
}

TEST_F(SchedulerTest, OtherDocumentsQueueBehindTheRunningOne) {
  scheduler_.schedule("a", request(1), 0ms);
  ASSERT_TRUE(waitStarted(1));
  scheduler_.schedule("b", request(2), 0ms);
  ASSERT_TRUE(runUntil([&] { return scheduler_.pending("b") && has("started a"); }));
  EXPECT_EQ(analyzer_.cancelled(), 0);
  analyzer_.release();
  analyzer_.release();
  ASSERT_TRUE(runUntil([&] { return has("finished b batch 2 ok"); }));
  EXPECT_EQ(events_, (std::vector<std::string>{"started a", "finished a batch 1 ok", "started b",
                                               "finished b batch 2 ok"}));
}

TEST_F(SchedulerTest, CancelDropsQueuedAndRunningWork) {
  scheduler_.schedule("a", request(1), 0ms);
  ASSERT_TRUE(waitStarted(1));
  scheduler_.schedule("b", request(2), 10s);
  scheduler_.cancel("b");
  scheduler_.cancel("a");
  ASSERT_TRUE(runUntil([&] { return has("cancelled a"); }));
  EXPECT_FALSE(scheduler_.pending("a"));
  EXPECT_FALSE(scheduler_.pending("b"));
  EXPECT_EQ(analyzer_.started(), 1);
}

// The cancel lands after the scheduler marked the job running and before the
// analyzer began (where the profiler used to reset its cancel flag): the job's
// own token still carries it, so the analysis stops without being released.
TEST_F(SchedulerTest, ACancelBeforeTheAnalyzerBeginsIsNotLost) {
  analyzer_.holdAtEntry();
  scheduler_.schedule("a", request(1), 0ms);
  ASSERT_TRUE(runUntil([&] { return scheduler_.running() == "a"; }));
  ASSERT_TRUE(analyzer_.waitEntered(1));
  scheduler_.cancel("a");
  analyzer_.letEnter();
  ASSERT_TRUE(runUntil([&] { return has("cancelled a"); }));
  EXPECT_EQ(analyzer_.started(), 1);
  EXPECT_EQ(analyzer_.cancelled(), 1);
  EXPECT_FALSE(has("finished a batch 1 ok"));
}

// A token belongs to one job: cancelling a finished one does not reach the next.
TEST_F(SchedulerTest, ACancelDoesNotReachTheNextJob) {
  scheduler_.schedule("a", request(1), 0ms);
  ASSERT_TRUE(waitStarted(1));
  scheduler_.cancel("a");
  ASSERT_TRUE(runUntil([&] { return has("cancelled a"); }));
  analyzer_.release();
  scheduler_.schedule("b", request(2), 0ms);
  ASSERT_TRUE(runUntil([&] { return has("finished b batch 2 ok"); }));
  EXPECT_EQ(analyzer_.cancelled(), 1);
}

} // namespace
} // namespace wavecast::lsp
