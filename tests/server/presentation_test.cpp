#include "fake_analyzer.h"
#include "lsp/presentation.h"

#include <gtest/gtest.h>

namespace wavecast::lsp {
namespace {

TEST(Presentation, FormatsTimesCompactly) {
  EXPECT_EQ(formatMs(0.001), "<0.01ms");
  EXPECT_EQ(formatMs(0.423), "0.42ms");
  EXPECT_EQ(formatMs(12.34), "12.3ms");
  EXPECT_EQ(formatMs(456.7), "457ms");
  EXPECT_EQ(formatMs(12345), "12.3s");
  EXPECT_EQ(formatBytes(5LL << 29), "2.5 GiB");
  EXPECT_EQ(formatUsd(0.0123), "$0.012");
  EXPECT_EQ(formatUsd(0.0021), "$0.0021");
}

TEST(Presentation, LineLabelListsEveryGpuAndTheShareOnTheFirst) {
  auto output = testing::sampleOutput("/w/train.py");
  EXPECT_EQ(lineLabel(output.prediction, output.prediction.lines[0]),
            "H100-SXM 1.5ms \u00b7 T4 12.0ms (15%)");
  EXPECT_EQ(lineLabel(output.prediction, output.prediction.lines[1]),
            "H100-SXM 0.20ms \u00b7 T4 1.6ms (2.0%)");
}

TEST(Presentation, HoverHasATableRowPerGpuAndTheOps) {
  auto output = testing::sampleOutput("/w/train.py");
  std::string md = lineHover(output.prediction, output.prediction.lines[0]);
  EXPECT_NE(md.find("| H100-SXM | 0.50ms | 1.0ms | <0.01ms | 1.5ms | 0.30ms | 15% |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| T4 | 4.0ms | 8.0ms | <0.01ms | 12.0ms | 12.0ms | 15% |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("**Host-bound** on H100-SXM (GPU idle 1.2ms of 1.5ms): the GPU waits for the "
                    "CPU"),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("T4 (GPU idle"), std::string::npos) << "the T4 is busy all the time";
  EXPECT_NE(md.find("Ops on this line (3): `aten::convolution`, `aten::relu`"), std::string::npos)
      << md;
}

TEST(Presentation, SummaryAndMemoryTitles) {
  auto output = testing::sampleOutput("/w/train.py");
  EXPECT_EQ(summaryTitle(output.prediction.summaries[0]),
            "H100-SXM: 10.0ms/iter \u00b7 3,200 samples/s \u00b7 $0.012/1k samples");
  EXPECT_EQ(memoryTitle(output.prediction),
            "batch 32 \u00b7 peak memory 2.0 GiB \u00b7 fits on all targets");
  EXPECT_EQ(outOfMemoryMessage(output.prediction), "");
  output.prediction.summaries[0].hostBound = true;
  output.prediction.summaries[0].gpuMs = 2.5;
  EXPECT_EQ(summaryTitle(output.prediction.summaries[0]),
            "H100-SXM: 10.0ms/iter \u00b7 3,200 samples/s \u00b7 $0.012/1k samples \u00b7 "
            "host-bound (GPU busy 2.5ms)");
  output.prediction.summaries[1].fitsInMemory = false;
  EXPECT_EQ(memoryTitle(output.prediction),
            "batch 32 \u00b7 peak memory 2.0 GiB \u00b7 does not fit on T4");
  EXPECT_EQ(outOfMemoryMessage(output.prediction),
            "Out of memory on T4: batch size 32 needs about 2.0 GiB, the GPU has 16.0 GiB. Lower "
            "the batch size.");
}

} // namespace
} // namespace wavecast::lsp
