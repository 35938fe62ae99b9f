#include "wavecast/eval/harness.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace wavecast::eval {
namespace {

using learned::ElementwiseOp;
using learned::KernelShape;

const std::string kFixtures = WAVECAST_EVAL_FIXTURES;

learned::GpuFeatures t4() {
  learned::GpuFeatures g;
  g.smCount = 40;
  g.clockMHz = 1590;
  g.fp32Gflops = 8141;
  g.memoryBandwidthGBs = 320;
  g.l2CacheMiB = 4;
  return g;
}

double bound(const KernelShape& k) {
  return learned::rooflineCost(k, t4()).boundMs();
}

TEST(Harness, RebuildsEndToEndAsTheLabelWasMeasured) {
  const LabelRun run = readLabelRun("Tesla_T4", kFixtures + "/labels/Tesla_T4/tiny-inf-128-2.csv");
  const RooflineTimer roofline;
  std::vector<UnmappedRow> unmapped;
  const LabelResult r = evaluateLabel(run, t4(), roofline, roofline, &unmapped);

  // Outside the layer once, layer rows x num_layer (3).
  const double expected =
      bound(KernelShape::elementwise(ElementwiseOp::MulScalar, 256, 64)) +
      3 * (bound(KernelShape::linear(256, 64, 96)) + bound(KernelShape::bmm(8, 128, 16, 128)) +
           bound(KernelShape::softmax(1024, 128)) + bound(KernelShape::layerNorm(256, 64))) +
      bound(KernelShape::elementwise(ElementwiseOp::MulScalar, 256, 64));
  EXPECT_NEAR(r.predictedE2eMs, expected, 1e-12);
  EXPECT_DOUBLE_EQ(r.baselineE2eMs, r.predictedE2eMs);
  EXPECT_DOUBLE_EQ(r.measuredE2eMs, 1.5);
  EXPECT_NEAR(r.measuredOpSumMs, 0.02 + 3 * 0.186 + 0.015, 1e-12);
  EXPECT_NEAR(r.families[size_t(OpFamily::Gemm)].measuredMs, 3 * (0.05 + 0.04), 1e-12);
  EXPECT_EQ(r.rows, 11);
  EXPECT_EQ(r.metadataRows, 4);
  EXPECT_EQ(r.unmappedRows, 1);
  ASSERT_EQ(unmapped.size(), 1u);
  EXPECT_EQ(unmapped[0].label, "Tesla_T4/tiny-inf-128-2");
  EXPECT_EQ(unmapped[0].row, "frobnicate");
  EXPECT_NEAR(r.errorPercent(), 100.0 * (expected - 1.5) / 1.5, 1e-9);
}

TEST(Harness, SummarisesPerGpuAndReportsUnmappedRows) {
  const LabelListing listing = listLabels(kFixtures + "/labels", {});
  const RooflineTimer roofline;
  const EvalReport report = evaluateLabels(listing, {{"Tesla_T4", t4()}}, roofline, roofline);
  ASSERT_EQ(report.gpus.size(), 1u);
  EXPECT_EQ(report.overall.count, 1);
  EXPECT_NEAR(report.overall.mapePercent, std::abs(report.labels[0].errorPercent()), 1e-9);
  EXPECT_NEAR(report.overall.biasPercent, report.labels[0].errorPercent(), 1e-9);
  EXPECT_EQ(report.unmapped.size(), 1u);
  EXPECT_EQ(report.labelsWithoutRows.size(), 1u);
  const nlohmann::json doc = toJson(report);
  EXPECT_EQ(doc["unmappedRows"][0]["reason"], "no mapping for function 'frobnicate'");
  EXPECT_NE(toMarkdown(report).find("Unmapped rows: 1."), std::string::npos);
  EXPECT_THROW(evaluateLabels(listing, {}, roofline, roofline), std::runtime_error);
}

TEST(ErrorSummaryTest, MapeMedianAndBias) {
  const ErrorSummary s = ErrorSummary::of({-10.0, 4.0, 2.0, -20.0});
  EXPECT_EQ(s.count, 4);
  EXPECT_DOUBLE_EQ(s.mapePercent, 9.0);
  EXPECT_DOUBLE_EQ(s.medianPercent, 7.0);
  EXPECT_DOUBLE_EQ(s.biasPercent, -6.0);
}

} // namespace
} // namespace wavecast::eval
