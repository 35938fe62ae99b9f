#include "crash_report.h"

#include <csignal>
#include <gtest/gtest.h>

namespace wavecast {
namespace {

// What Python's faulthandler writes for a segfault in ctypes called from a script.
const char* kReport = R"(Fatal Python error: Segmentation fault

Current thread 0x00007f0e4d0b7040 (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/home/u/proj/model.py", line 17 in iteration
  File "/home/u/proj/lib/site-packages/x.py", line 3 in wrap
  File "/usr/lib/wavecast/tracer.py", line 140 in _call_user

Extension modules: torch._C (total: 1)
)";

int signalled(int signal) {
  return signal & 0x7f;
} // the wait status of a process killed by `signal`

TEST(CrashReport, ParsesFaultHandlerFrames) {
  const auto frames = parseFaultHandlerFrames(kReport);
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0].file, "/usr/lib/python3.11/ctypes/__init__.py");
  EXPECT_EQ(frames[0].line, 519);
  EXPECT_EQ(frames[0].function, "string_at");
  EXPECT_EQ(frames[1].file, "/home/u/proj/model.py");
  EXPECT_EQ(frames[1].line, 17);
}

TEST(CrashReport, SegfaultNamesTheInnermostProjectLine) {
  const ProfileError error = crashError(signalled(SIGSEGV), kReport, "/home/u/proj/train.py");
  EXPECT_EQ(error.kind, ProfileErrorKind::WorkerCrashed);
  EXPECT_NE(error.message.find("SIGSEGV"), std::string::npos);
  EXPECT_EQ(error.file, "/home/u/proj/model.py");
  EXPECT_EQ(error.line, 17);
}

TEST(CrashReport, SigkillIsOutOfMemory) {
  const ProfileError error = crashError(signalled(SIGKILL), "", "/home/u/proj/train.py");
  EXPECT_EQ(error.kind, ProfileErrorKind::OutOfMemory);
  EXPECT_EQ(error.file, "/home/u/proj/train.py");
  EXPECT_EQ(error.line, 0);
}

TEST(CrashReport, ExitStatusIsReported) {
  const ProfileError error = crashError(3 << 8, "", "/home/u/proj/train.py");
  EXPECT_EQ(error.kind, ProfileErrorKind::WorkerCrashed);
  EXPECT_NE(error.message.find("status 3"), std::string::npos);
}

} // namespace
} // namespace wavecast
