#include "wavecast/eval/labels.h"

#include <gtest/gtest.h>

namespace wavecast::eval {
namespace {

const std::string kFixtures = WAVECAST_EVAL_FIXTURES;

TEST(ShapeParsing, ReadsNestedListsAndTuples) {
  const auto list = parseShapeList("[[8, 512, 1024], [1], []]");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0], (std::vector<int64_t>{8, 512, 1024}));
  EXPECT_EQ(list[1], (std::vector<int64_t>{1}));
  EXPECT_TRUE(list[2].empty());
  EXPECT_TRUE(parseShapeList("[]").empty());
  EXPECT_EQ(parseShape("(8, 16, 512, 64)"), (std::vector<int64_t>{8, 16, 512, 64}));
  EXPECT_EQ(parseShape("(1,)"), (std::vector<int64_t>{1}));
  EXPECT_TRUE(parseShape("").empty());
}

TEST(ShapeParsing, RejectsJunk) {
  EXPECT_THROW(parseShapeList("[[8, x]]"), std::invalid_argument);
  EXPECT_THROW(parseShapeList("[[8, 2]"), std::invalid_argument);
  EXPECT_THROW(parseShapeList("[8]"), std::invalid_argument);
}

TEST(LabelListingTest, FindsPairsAndListsJsonOnlyLabels) {
  const LabelListing all = listLabels(kFixtures + "/labels", {});
  ASSERT_EQ(all.runs.size(), 1u);
  EXPECT_EQ(all.runs[0].gpu, "Tesla_T4");
  ASSERT_EQ(all.withoutRows.size(), 1u);
  EXPECT_EQ(all.withoutRows[0], "Tesla_T4/tiny-inf-128-2-fusion.json");
  // One GPU folder works too, and the filter drops other GPUs.
  EXPECT_EQ(listLabels(kFixtures + "/labels/Tesla_T4", {}).runs.size(), 1u);
  EXPECT_TRUE(listLabels(kFixtures + "/labels", {"Tesla_P4"}).runs.empty());
  EXPECT_THROW(listLabels(kFixtures + "/missing", {}), std::runtime_error);
}

TEST(LabelRunTest, ReadsRowsModulesAndLayerMembership) {
  const LabelRun run = readLabelRun("Tesla_T4", kFixtures + "/labels/Tesla_T4/tiny-inf-128-2.csv");
  EXPECT_EQ(run.model, "tiny");
  EXPECT_EQ(run.mode, "inf");
  EXPECT_EQ(run.sequence, 128);
  EXPECT_EQ(run.batch, 2);
  EXPECT_EQ(run.numLayers, 3);
  EXPECT_DOUBLE_EQ(run.e2eMs, 1.5);
  EXPECT_FALSE(run.training());
  ASSERT_EQ(run.rows.size(), 11u);
  const FxRow& embedding = run.rows[1];
  EXPECT_EQ(embedding.kind, "call_module");
  EXPECT_EQ(embedding.moduleClass, "Embedding");
  EXPECT_FALSE(embedding.inRepeatedLayer);
  EXPECT_EQ(embedding.outputShape, (std::vector<int64_t>{2, 128, 64}));
  const FxRow& query = run.rows[2];
  EXPECT_EQ(query.moduleClass, "Linear");
  EXPECT_TRUE(query.inRepeatedLayer);
  EXPECT_DOUBLE_EQ(query.forwardMs, 0.05);
  EXPECT_EQ(run.rows[4].inputShapes[1], (std::vector<int64_t>{2, 4, 16, 128}));
  EXPECT_FALSE(run.rows[9].inRepeatedLayer);
}

} // namespace
} // namespace wavecast::eval
