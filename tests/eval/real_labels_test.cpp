#include "wavecast/eval/harness.h"
#include "wavecast/learned/kernel_dataset.h"
#include "wavecast/learned/learned_models.h"

#include <filesystem>
#include <gtest/gtest.h>

namespace fs = std::filesystem;

namespace wavecast::eval {
namespace {

const std::string kRoot = WAVECAST_SOURCE_ROOT_DIR;
const std::string kData = kRoot + "/../shared/data/neusight";

// docs/accuracy.md, "Shipped weights on every label": Tesla_P4 row.
TEST(RealLabels, ShippedWeightsOnTeslaP4GiveTheDocumentedMape) {
  if (!fs::is_directory(kData + "/labels/Tesla_P4"))
    GTEST_SKIP() << "NeuSight data not found at " << kData;
  const learned::LearnedModels models = learned::LearnedModels::open(kRoot + "/data/weights");
  const LabelListing listing = listLabels(kData + "/labels/Tesla_P4", {});
  const EvalReport report =
      evaluateLabels(listing, learned::loadSpecSheets(kData, kRoot + "/data/gpus.json"),
                     LearnedTimer(models), RooflineTimer());
  ASSERT_EQ(report.labels.size(), 3u);
  EXPECT_EQ(report.unmapped.size(), 0u);
  EXPECT_NEAR(report.overall.mapePercent, 39.1, 0.05);
  EXPECT_NEAR(report.overall.medianPercent, 24.9, 0.05);
  EXPECT_NEAR(report.overallBaseline.mapePercent, 50.5, 0.05);
}

} // namespace
} // namespace wavecast::eval
