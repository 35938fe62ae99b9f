// Calibration files (wavecast/predictor/calibration.h): reading them, and predictions that
// take a calibrated GPU's measured op times.
#include "presentation.h"
#include "wavecast/predictor/calibration.h"
#include "wavecast/predictor/gpu_database.h"
#include "wavecast/predictor/op_cost.h"
#include "wavecast/predictor/predictor.h"
#include "wavecast/predictor/roofline.h"

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace wavecast {
namespace {

using nlohmann::json;

const GpuDatabase& db() {
  static const GpuDatabase database = GpuDatabase::fromFile(WAVECAST_GPUS_JSON);
  return database;
}

json tensorJson(std::vector<int64_t> shape, const std::string& dtype) {
  return {{"shape", shape}, {"dtype", dtype}, {"contiguous", true}};
}

json mmEntry(int64_t m, const std::string& dtype, bool tf32, double ms) {
  return {{"name", "aten::mm"},
          {"phase", "forward"},
          {"inputs", {tensorJson({m, 768}, dtype), tensorJson({768, 3072}, dtype)}},
          {"outputs", {tensorJson({m, 3072}, dtype)}},
          {"args", json::object()},
          {"precision", tf32                 ? "tf32"
                        : dtype == "float32" ? "fp32"
                                             : "bf16"},
          {"tf32", tf32},
          {"median_ms", ms},
          {"spread_ms", 0.01},
          {"repeats", 10}};
}

json addEntry(int64_t rows, double ms) {
  const json t = tensorJson({rows, 768}, "float32");
  return {{"name", "aten::add"},    {"phase", "forward"},  {"inputs", {t, t}}, {"outputs", {t}},
          {"args", {{"alpha", 1}}}, {"precision", "fp32"}, {"median_ms", ms},  {"repeats", 10}};
}

json h100Calibration() {
  return {{"format", "wavecast-calibration"},
          {"version", 1},
          {"complete", true},
          {"date", "2026-11-25T12:00:00Z"},
          {"gpu",
           {{"name", "NVIDIA H100 80GB HBM3"},
            {"compute_capability", "9.0"},
            {"sm_count", 132},
            {"memory_bytes", 85520809984}}},
          {"driver", "550.54.15"},
          {"torch", "2.11.0"},
          {"cuda", "13.0"},
          {"timer", "cuda_events"},
          {"host", {{"op_us", 10.0}, {"launch_us", 4.0}, {"loop", 2000}}},
          {"entries",
           {mmEntry(1024, "bfloat16", false, 0.5), mmEntry(1024, "float32", true, 0.3),
            addEntry(8192, 0.08)}}};
}

std::string errorOf(const json& doc) {
  try {
    calibrationFromJson(doc, "bad.json");
  } catch (const CalibrationError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Calibration, ReadsAFileTheSuiteWroteWithItsFakeTimer) {
  const Calibration c =
      loadCalibration(std::string(WAVECAST_PREDICTOR_FIXTURES) + "/calibration_fake.json");
  EXPECT_EQ(c.gpuName, "NVIDIA H100 80GB HBM3");
  EXPECT_TRUE(c.complete);
  EXPECT_EQ(c.timer, "fake");
  ASSERT_TRUE(c.host.has_value());
  EXPECT_DOUBLE_EQ(c.host->opUs, 20.0); // the fake timer's host costs
  EXPECT_DOUBLE_EQ(c.host->launchUs, 5.0);
  EXPECT_EQ(c.host->toDevice.pinned, 25.0);
  EXPECT_EQ(c.host->toDevice.pageable, 10.0);
  EXPECT_EQ(c.host->toHost.pinned, 24.0);
  EXPECT_EQ(c.host->toHost.pageable, 8.0);
  // F.linear(x [8192, 768], w [768, 768], b) forward: addmm(b, x, w^T). The fake timer's
  // time: 2 us + 1 ns per element of its tensors, 768 + 2 x 6,291,456 + 589,824.
  const CalibrationEntry* addmm = nullptr;
  for (const auto& entry : c.entries)
    if (entry.op.name == "aten::addmm" && entry.precision == "fp32")
      addmm = &entry;
  ASSERT_NE(addmm, nullptr);
  EXPECT_EQ(addmm->op.phase, Phase::Forward);
  ASSERT_EQ(addmm->op.inputs.size(), 3u);
  EXPECT_EQ(addmm->op.inputs[1]->shape, (std::vector<int64_t>{8192, 768}));
  EXPECT_FALSE(addmm->op.inputs[2]->contiguous);
  EXPECT_NEAR(addmm->medianMs, 0.002 + (768 + 2 * 6291456 + 589824) * 1e-6, 1e-9);
  EXPECT_EQ(addmm->repeats, 2);
  EXPECT_FALSE(addmm->tf32);
}

TEST(Calibration, RejectsAWrongVersionOrAMalformedFieldNamingFileAndField) {
  auto expectError = [](json doc, const std::string& fragment) {
    const std::string message = errorOf(doc);
    EXPECT_NE(message.find("bad.json"), std::string::npos) << message;
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
  };
  auto doc = h100Calibration();
  doc["version"] = 2;
  expectError(doc, "\"version\" is 2 but this wavecast reads version 1");
  doc = h100Calibration();
  doc["format"] = "wavecast-trace";
  expectError(doc, "\"format\" must be \"wavecast-calibration\"");
  doc = h100Calibration();
  doc["entries"][1].erase("median_ms");
  expectError(doc, "entries[1].median_ms is missing");
  doc = h100Calibration();
  doc["entries"][2]["median_ms"] = -1;
  expectError(doc, "entries[2].median_ms must be a non-negative number");
  doc = h100Calibration();
  doc["entries"][0]["inputs"][1]["shape"] = "wide";
  expectError(doc, "entries[0].inputs[1].shape must be a list of integers");
  doc = h100Calibration();
  doc["gpu"].erase("name");
  expectError(doc, "gpu.name is missing");
  doc = h100Calibration();
  doc["host"]["op_us"] = "fast";
  expectError(doc, "host.op_us must be a non-negative number");

  const std::string path = testing::TempDir() + "/not_json_calibration.json";
  std::ofstream(path) << "{ not json";
  try {
    loadCalibration(path);
    ADD_FAILURE() << "expected a CalibrationError";
  } catch (const CalibrationError& e) {
    EXPECT_EQ(std::string(e.what()), "calibration file " + path + ": not valid JSON");
  }
  std::remove(path.c_str());
}

OpRecord mm(int64_t id, int64_t m, ScalarType dtype, Phase phase = Phase::Forward) {
  OpRecord op;
  op.id = id;
  op.name = "aten::mm";
  op.phase = phase;
  op.loc = {"/p/model.py", 10 + static_cast<int>(id), "forward"};
  op.inputs = {TensorMeta{{m, 768}, dtype}, TensorMeta{{768, 3072}, dtype}};
  op.outputs = {TensorMeta{{m, 3072}, dtype}};
  return op;
}

OpRecord add(int64_t id, int64_t rows) {
  OpRecord op;
  op.id = id;
  op.name = "aten::add";
  op.loc = {"/p/model.py", 10 + static_cast<int>(id), "forward"};
  const TensorMeta t{{rows, 768}, ScalarType::Float32};
  op.inputs = {t, t};
  op.outputs = {t};
  op.args["alpha"] = int64_t{1};
  return op;
}

TEST(Calibration, ACalibratedGpuTakesTheMeasuredTimesOfExactlyTheMatchedOps) {
  Trace trace;
  trace.batchSize = 8;
  // A near shape's time follows the roofline from the measured shape to it.
  trace.ops = {mm(0, 1024, ScalarType::BFloat16), // its own shape: 0.5 ms
               mm(1, 1536, ScalarType::BFloat16), // near: 1.5x the FLOPs, a wave more
               mm(2, 1023, ScalarType::BFloat16), // rows not a multiple of 8: other kernels
               mm(3, 1024, ScalarType::Float32),  // float32 without TF32: the entry ran TF32
               add(4, 6144),                      // near: 0.75x the bytes
               mm(5, 1024, ScalarType::BFloat16, Phase::Backward)}; // another phase
  trace.precision = FloatPrecision{false, true, std::nullopt};

  const auto gpus = db().resolve({"H100", "A100"});
  const DeviceSpec* calibrated = db().find("NVIDIA H100 80GB HBM3");
  ASSERT_NE(calibrated, nullptr);
  ASSERT_EQ(calibrated->id, gpus[0].id) << "the name torch reports finds the GPU";

  PredictorOptions plain;
  PredictorOptions options;
  options.calibrations[gpus[0].id] =
      std::make_shared<const CalibrationTable>(calibrationFromJson(h100Calibration(), "h100"));
  const Prediction without = Predictor(plain).predict(trace, gpus);
  const Prediction with = Predictor(options).predict(trace, gpus);

  const auto& h100 = with.ops[0];
  EXPECT_EQ(h100[0].method, PredictionMethod::Calibrated);
  EXPECT_DOUBLE_EQ(h100[0].timeMs, 0.5);
  const auto roofline = [&](const OpRecord& op) {
    return rooflineTime(estimateOpCost(op), gpus[0], options.roofline).timeMs;
  };
  EXPECT_EQ(h100[1].method, PredictionMethod::Calibrated);
  const double gemmRatio = roofline(trace.ops[1]) / roofline(trace.ops[0]);
  EXPECT_GT(gemmRatio, 1.5); // the tiles' waves: more than the FLOPs' ratio
  EXPECT_DOUBLE_EQ(h100[1].timeMs, 0.5 * gemmRatio);
  EXPECT_EQ(h100[4].method, PredictionMethod::Calibrated);
  EXPECT_NEAR(h100[4].timeMs, 0.08 * roofline(trace.ops[4]) / roofline(add(9, 8192)), 1e-12);
  EXPECT_NEAR(h100[4].timeMs, 0.08 * 0.75, 0.002); // streaming: nearly the bytes' ratio
  for (const size_t unmatched : {2u, 3u, 5u}) {
    EXPECT_NE(h100[unmatched].method, PredictionMethod::Calibrated) << "op " << unmatched;
    EXPECT_DOUBLE_EQ(h100[unmatched].timeMs, without.ops[0][unmatched].timeMs) << unmatched;
  }
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    EXPECT_EQ(with.ops[1][i].method, without.ops[1][i].method) << "A100 untouched, op " << i;
    EXPECT_DOUBLE_EQ(with.ops[1][i].timeMs, without.ops[1][i].timeMs) << i;
  }

  ASSERT_EQ(with.summaries.size(), 2u);
  EXPECT_EQ(with.summaries[0].methods.calibratedOn, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpuMethodText(with.summaries[0].methods),
            "calibrated on NVIDIA H100 80GB HBM3 + analytic roofline");
  EXPECT_EQ(gpuMethodText(with.summaries[1].methods), "analytic roofline");
  EXPECT_EQ(std::string(toString(PredictionMethod::Calibrated)), "calibrated");
  // Host: six ops that launch work at the host model's 50 us and one backward call
  // (875 us), on both GPUs: a calibration's host costs are not used (docs/calibration.md).
  EXPECT_NEAR(with.summaries[0].hostMs, (6 * 50.0 + 875.0) / 1000, 1e-12);
  EXPECT_NEAR(with.summaries[1].hostMs, (6 * 50.0 + 875.0) / 1000, 1e-12);
}

// A 2-layer LSTM (1024 -> 1024) over 50 steps, batch first, as a trace records the layer
// and `wavecast calibrate` describes cuDNN's _cudnn_rnn (rnn.as_traced_layer).
std::vector<std::vector<int64_t>> lstmShapes(int64_t batch) {
  std::vector<std::vector<int64_t>> shapes{{batch, 50, 1024}, {2, batch, 1024}, {2, batch, 1024}};
  for (int layer = 0; layer < 2; ++layer)
    shapes.insert(shapes.end(), {{4096, 1024}, {4096, 1024}, {4096}, {4096}});
  return shapes;
}

std::map<std::string, ArgValue> lstmArgs(int64_t batch) {
  return {{"mode", int64_t{2}},
          {"input_size", int64_t{1024}},
          {"hidden_size", int64_t{1024}},
          {"proj_size", int64_t{0}},
          {"num_layers", int64_t{2}},
          {"bidirectional", false},
          {"batch_first", true},
          {"seq_len", int64_t{50}},
          {"batch", batch},
          {"packed", false},
          {"dropout", 0.2},
          {"train", true},
          {"bias", true}};
}

TEST(Calibration, ACalibratedGpuCopiesToItAtItsOwnMachinesRates) {
  // A pageable batch of 40 MB, staged in 4 ms on the CPU that traced it.
  Trace trace;
  OpRecord copy;
  copy.name = "wavecast::host_to_device";
  copy.args = {{"bytes", int64_t{40000000}},
               {"pinned", false},
               {"non_blocking", false},
               {"staging_ms", 4.0}};
  trace.ops = {copy};
  const auto gpus = db().resolve({"H100", "A100"});
  json file = h100Calibration();
  file["host"]["host_to_device_gbs"] = {{"pinned", 50.0}, {"pageable", 20.0}};
  PredictorOptions options;
  options.calibrations[gpus[0].id] =
      std::make_shared<const CalibrationTable>(calibrationFromJson(file, "h100"));
  const Prediction with = Predictor(options).predict(trace, gpus);
  // The H100's machine: its DMA at 50 GB/s, the whole pageable copy at 20 GB/s.
  EXPECT_EQ(with.ops[0][0].method, PredictionMethod::Calibrated);
  EXPECT_NEAR(with.ops[0][0].timeMs, 0.8, 1e-12);
  EXPECT_NEAR(with.ops[0][0].wallMs, options.host.opUs * 1e-3 + 2.0, 1e-9);
  // The A100: its PCIe 4.0 link's published rate, and this CPU's staging.
  EXPECT_EQ(with.ops[1][0].method, PredictionMethod::Roofline);
  EXPECT_NEAR(with.ops[1][0].timeMs, 40e6 / (gpus[1].hostLink.hostToDeviceGBs * 1e9) * 1e3, 1e-12);
  EXPECT_NEAR(with.ops[1][0].wallMs, options.host.opUs * 1e-3 + 4.0, 1e-9);
}

TEST(Calibration, ARecurrentLayerTakesTheTimeOfItsCudnnOpAsMeasured) {
  json entry = {{"name", "aten::lstm"},     {"phase", "forward"},  {"inputs", json::array()},
                {"outputs", json::array()}, {"precision", "tf32"}, {"tf32", true},
                {"median_ms", 2.5},         {"repeats", 10}};
  for (const auto& shape : lstmShapes(64))
    entry["inputs"].push_back(tensorJson(shape, "float32"));
  entry["args"] = json::object();
  for (const auto& [key, value] : lstmArgs(64))
    std::visit([&, key = key](const auto& v) { entry["args"][key] = v; }, value);
  auto doc = h100Calibration();
  doc["entries"] = {entry};

  Trace trace;
  trace.batchSize = 64;
  for (const int64_t batch : {64, 32}) {
    OpRecord op;
    op.id = static_cast<int64_t>(trace.ops.size());
    op.name = "aten::lstm";
    op.loc = {"/p/model.py", 20, "forward"};
    for (const auto& shape : lstmShapes(batch))
      op.inputs.push_back(TensorMeta{shape, ScalarType::Float32});
    op.outputs = {TensorMeta{{batch, 50, 1024}, ScalarType::Float32}};
    op.args = lstmArgs(batch);
    trace.ops.push_back(op);
  }
  trace.precision = FloatPrecision{false, true, std::nullopt}; // cuDNN's TF32 on, as by default

  const auto gpus = db().resolve({"H100"});
  PredictorOptions options;
  options.calibrations[gpus[0].id] =
      std::make_shared<const CalibrationTable>(calibrationFromJson(doc, "h100"));
  const Prediction prediction = Predictor(options).predict(trace, gpus);
  EXPECT_EQ(prediction.ops[0][0].method, PredictionMethod::Calibrated);
  EXPECT_DOUBLE_EQ(prediction.ops[0][0].timeMs, 2.5);
  // Another batch is another layer's arguments: no entry stands for it.
  EXPECT_NE(prediction.ops[0][1].method, PredictionMethod::Calibrated);
}

TEST(Calibration, TheFirstOfEqualEntriesWinsAndFarShapesAreNotScaled) {
  auto doc = h100Calibration();
  doc["entries"].push_back(mmEntry(1024, "bfloat16", false, 9.0)); // the same op again
  const CalibrationTable table(calibrationFromJson(doc, "h100"));
  const OpCost cost = estimateOpCost(mm(0, 1024, ScalarType::BFloat16));
  const auto exact = table.find(mm(0, 1024, ScalarType::BFloat16), cost);
  ASSERT_TRUE(exact.has_value());
  EXPECT_TRUE(exact->exact());
  EXPECT_DOUBLE_EQ(exact->timeMs(), 0.5);
  // 4,096 rows: 4x the work, past the near-shape ratio of 2.
  const OpRecord far = mm(1, 4096, ScalarType::BFloat16);
  EXPECT_FALSE(table.find(far, estimateOpCost(far)).has_value());
  // Alignment matters for matrix work only: an add of 6,143 rows is near the 8,192-row one.
  const OpRecord odd = add(2, 6143);
  const auto near = table.find(odd, estimateOpCost(odd));
  ASSERT_TRUE(near.has_value());
  EXPECT_FALSE(near->exact());
  EXPECT_NEAR(near->timeMs(), 0.08 * 6143.0 / 8192.0, 1e-12);
}

TEST(Calibration, ANearGemmHasNearRowsColumnsAndKNotJustNearFlops) {
  // The entry: 1,024 x 768 times 768 x 3,072. A 4,096 x 192 times 192 x 3,072 GEMM does the
  // same FLOPs over a K a quarter as long: other tiles, other slices, not near.
  const CalibrationTable table(calibrationFromJson(h100Calibration(), "h100"));
  OpRecord shortK = mm(0, 4096, ScalarType::BFloat16);
  shortK.inputs = {TensorMeta{{4096, 192}, ScalarType::BFloat16},
                   TensorMeta{{192, 3072}, ScalarType::BFloat16}};
  const OpCost cost = estimateOpCost(shortK);
  ASSERT_DOUBLE_EQ(cost.flops, estimateOpCost(mm(1, 1024, ScalarType::BFloat16)).flops);
  EXPECT_FALSE(table.find(shortK, cost).has_value());
  // 1,536 rows: each dimension within 2x of the entry's, near.
  const OpRecord moreRows = mm(2, 1536, ScalarType::BFloat16);
  EXPECT_TRUE(table.find(moreRows, estimateOpCost(moreRows)).has_value());
}

// Training-mode batch norm of a bf16 activation with float32 parameters, as under autocast.
OpRecord batchNorm(std::vector<int64_t> shape) {
  OpRecord op;
  op.name = "aten::native_batch_norm";
  op.loc = {"/p/model.py", 10, "forward"};
  const std::vector<int64_t> channels{shape[1]};
  op.inputs = {TensorMeta{shape, ScalarType::BFloat16}, TensorMeta{channels}, TensorMeta{channels},
               TensorMeta{channels}, TensorMeta{channels}};
  op.outputs = {TensorMeta{std::move(shape), ScalarType::BFloat16}};
  op.args = {{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}};
  return op;
}

TEST(Calibration, ANearBatchNormHasEachDimensionNearNotJustNearBytes) {
  // Inception-v3's [32, 192, 35, 35] and ResNet-50's [8, 256, 56, 56] at batch 8 move
  // about the same bytes, but a batch norm runs a block per channel over the rest: 192
  // blocks of 39,200 elements against 256 of 25,088. On the H100 the first took 63 us in
  // calibration, the second 30 us in ResNet-50 (bench/truth/data/h100): one is no measure
  // of the other.
  auto doc = h100Calibration();
  const std::vector<int64_t> channels{192};
  doc["entries"].push_back({{"name", "aten::native_batch_norm"},
                            {"phase", "forward"},
                            {"inputs",
                             {tensorJson({32, 192, 35, 35}, "bfloat16"),
                              tensorJson(channels, "float32"), tensorJson(channels, "float32"),
                              tensorJson(channels, "float32"), tensorJson(channels, "float32")}},
                            {"outputs", {tensorJson({32, 192, 35, 35}, "bfloat16")}},
                            {"args", {{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}}},
                            {"precision", "bf16"},
                            {"median_ms", 0.063},
                            {"repeats", 10}});
  const CalibrationTable table(calibrationFromJson(doc, "h100"));
  const OpRecord resnet = batchNorm({8, 256, 56, 56});
  const OpCost cost = estimateOpCost(resnet);
  const OpRecord entry = batchNorm({32, 192, 35, 35});
  const double bytesRatio = cost.dramBytes() / estimateOpCost(entry).dramBytes();
  ASSERT_GT(bytesRatio, 0.5);
  ASSERT_LT(bytesRatio, 2.0);
  EXPECT_FALSE(table.find(resnet, cost).has_value());
  // 48 images of the same maps: each dimension within 2x, near.
  const OpRecord moreImages = batchNorm({48, 192, 35, 35});
  const auto near = table.find(moreImages, estimateOpCost(moreImages));
  ASSERT_TRUE(near.has_value());
  EXPECT_FALSE(near->exact());
}

json batchNormEntry(const std::vector<int64_t>& shape, double ms) {
  const std::vector<int64_t> channels{shape[1]};
  return {{"name", "aten::native_batch_norm"},
          {"phase", "forward"},
          {"inputs",
           {tensorJson(shape, "bfloat16"), tensorJson(channels, "float32"),
            tensorJson(channels, "float32"), tensorJson(channels, "float32"),
            tensorJson(channels, "float32")}},
          {"outputs", {tensorJson(shape, "bfloat16")}},
          {"args", {{"training", true}, {"momentum", 0.1}, {"eps", 1e-5}}},
          {"precision", "bf16"},
          {"median_ms", ms},
          {"repeats", 10}};
}

TEST(Calibration, OfNearShapesTheOneNearestInEachDimensionIsTaken) {
  // ResNet-50's [32, 1024, 14, 14] at batch 32 moves the bytes of the calibration's
  // [64, 2048, 7, 7] exactly, and half those of its [64, 1024, 14, 14]. On the H100 it took
  // 29.7 us in FP32, the first entry 45.3 us: twice the channels, each over half the rows.
  // The entry with its channels and maps is the measure, halved.
  auto doc = h100Calibration();
  doc["entries"].push_back(batchNormEntry({64, 2048, 7, 7}, 0.0453));
  doc["entries"].push_back(batchNormEntry({64, 1024, 14, 14}, 0.0585));
  const CalibrationTable table(calibrationFromJson(doc, "h100"));
  const OpRecord resnet = batchNorm({32, 1024, 14, 14});
  const auto near = table.find(resnet, estimateOpCost(resnet));
  ASSERT_TRUE(near.has_value());
  EXPECT_DOUBLE_EQ(near->measuredMs, 0.0585);
  EXPECT_NEAR(near->ratio, 0.5, 1e-3);
}

// A copy of a non-contiguous view into a contiguous tensor (x.permute(...).contiguous()).
OpRecord clone(int64_t id, std::vector<int64_t> shape, std::vector<int64_t> strides) {
  OpRecord op;
  op.id = id;
  op.name = "aten::clone";
  op.loc = {"/p/model.py", 10 + static_cast<int>(id), "forward"};
  TensorMeta view{shape, ScalarType::Float32};
  view.contiguous = false;
  view.strides = std::move(strides);
  op.inputs = {view};
  op.outputs = {TensorMeta{std::move(shape), ScalarType::Float32}};
  return op;
}

json cloneEntry(std::vector<int64_t> shape, std::vector<int64_t> strides, double ms) {
  json view = tensorJson(shape, "float32");
  view["contiguous"] = false;
  view["strides"] = strides;
  return {{"name", "aten::clone"},  {"phase", "forward"},
          {"inputs", {view}},       {"outputs", {tensorJson(shape, "float32")}},
          {"args", json::object()}, {"precision", "fp32"},
          {"median_ms", ms},        {"repeats", 10}};
}

TEST(Calibration, ACopyAcrossRowsAndACopyOfWholeRowsAreTimedApart) {
  // x [8, 1024, 12, 64] (the heads of a [8, 1024, 768] activation): its head split
  // permute(0, 2, 1, 3) keeps rows of 64 whole; permute(0, 2, 3, 1), k.transpose(-2, -1)'s
  // layout, reads across rows. Same shape class, same bytes: only the strides tell them.
  auto doc = h100Calibration();
  doc["entries"].push_back(cloneEntry({8, 12, 1024, 64}, {786432, 64, 768, 1}, 0.02));
  doc["entries"].push_back(cloneEntry({8, 12, 64, 1024}, {786432, 64, 1, 768}, 0.15));
  const CalibrationTable table(calibrationFromJson(doc, "h100"));
  // GPT-2's views of its qkv projection (rows of 2,304), 1,023 tokens: near, not exact.
  const OpRecord heads = clone(0, {8, 12, 1023, 64}, {2356992, 64, 2304, 1});
  const OpRecord keys = clone(1, {8, 12, 64, 1023}, {2356992, 64, 1, 2304});
  const auto rows = table.find(heads, estimateOpCost(heads));
  const auto across = table.find(keys, estimateOpCost(keys));
  ASSERT_TRUE(rows.has_value());
  ASSERT_TRUE(across.has_value());
  EXPECT_NEAR(rows->timeMs(), 0.02 * 1023.0 / 1024.0, 1e-12);
  EXPECT_NEAR(across->timeMs(), 0.15 * 1023.0 / 1024.0, 1e-12);
  // A trace from before strides were recorded matches neither.
  OpRecord unknown = keys;
  unknown.inputs[0]->strides.clear();
  EXPECT_FALSE(table.find(unknown, estimateOpCost(unknown)).has_value());
}

} // namespace
} // namespace wavecast
