#include "json_writer.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <nlohmann/json.hpp>

namespace wavecast {
namespace {

std::string millisecondsText(double value) {
  std::string out;
  {
    JsonWriter w(out);
    w.value(Milliseconds{value});
  }
  return out;
}

TEST(JsonWriter, WritesMillisecondsToTheNanosecond) {
  EXPECT_EQ(millisecondsText(0), "0.0");
  EXPECT_EQ(millisecondsText(2), "2.0");
  EXPECT_EQ(millisecondsText(0.5), "0.5");
  EXPECT_EQ(millisecondsText(0.000125), "0.000125");
  EXPECT_EQ(millisecondsText(0.10155547813871818), "0.101555");
  EXPECT_EQ(millisecondsText(0.0000005), "0.000001") << "rounded half away from zero";
  EXPECT_EQ(millisecondsText(1e-10), "0.0");
  EXPECT_EQ(millisecondsText(-0.25), "-0.25");
  EXPECT_EQ(millisecondsText(-1e-10), "0.0") << "no negative zero";
  EXPECT_EQ(millisecondsText(134750.78079216988), "134750.780792");
  EXPECT_EQ(millisecondsText(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(millisecondsText(1e13), "1e+13") << "past int64 nanoseconds: a double";
}

TEST(JsonWriter, MillisecondsReadBackWithinHalfANanosecond) {
  for (double value = 1e-4; value < 1e7; value *= 1.37) {
    const double read = nlohmann::json::parse(millisecondsText(value)).get<double>();
    EXPECT_NEAR(read, value, 0.5e-6 + 1e-15 * value) << value;
  }
}

TEST(JsonWriter, PlacesCommasAndKeys) {
  std::string out;
  {
    JsonWriter w(out);
    w.beginObject()
        .field("a", 1)
        .field("time_ms", Milliseconds{1.5})
        .key("list")
        .beginArray()
        .value("x\"y")
        .value(nullptr)
        .endArray()
        .endObject();
  }
  EXPECT_EQ(out, R"({"a":1,"time_ms":1.5,"list":["x\"y",null]})");
}

} // namespace
} // namespace wavecast
