// A prediction as the results JSON (docs/results-json.md).
#pragma once

#include "wavecast/predictor/prediction.h"

#include <nlohmann/json_fwd.hpp>

namespace wavecast {

nlohmann::json predictionToJson(const Prediction& prediction);

} // namespace wavecast
