#include "wavecast/trace.h"

#include <array>

namespace wavecast {
namespace {

struct ScalarTypeInfo {
  ScalarType type;
  const char* name; // torch's, as str(dtype) minus "torch."
  int bytes;
  bool floatingPoint;
};

constexpr std::array<ScalarTypeInfo, 15> kScalarTypes{{
    {ScalarType::Float64, "float64", 8, true},
    {ScalarType::Float32, "float32", 4, true},
    {ScalarType::Float16, "float16", 2, true},
    {ScalarType::BFloat16, "bfloat16", 2, true},
    {ScalarType::Float8E4M3, "float8_e4m3fn", 1, true},
    {ScalarType::Float8E5M2, "float8_e5m2", 1, true},
    {ScalarType::Complex64, "complex64", 8, false},
    {ScalarType::Complex128, "complex128", 16, false},
    {ScalarType::Int64, "int64", 8, false},
    {ScalarType::Int32, "int32", 4, false},
    {ScalarType::Int16, "int16", 2, false},
    {ScalarType::Int8, "int8", 1, false},
    {ScalarType::UInt8, "uint8", 1, false},
    {ScalarType::Bool, "bool", 1, false},
    {ScalarType::Other, "other", 4, false},
}};

const ScalarTypeInfo& infoOf(ScalarType type) {
  for (const auto& info : kScalarTypes)
    if (info.type == type)
      return info;
  return kScalarTypes.back();
}

} // namespace

const char* toString(ScalarType type) { return infoOf(type).name; }

ScalarType scalarTypeFromString(std::string_view name) {
  for (const auto& info : kScalarTypes)
    if (name == info.name)
      return info.type;
  return ScalarType::Other;
}

int elementSize(ScalarType type) { return infoOf(type).bytes; }

bool isFloatingPoint(ScalarType type) { return infoOf(type).floatingPoint; }

} // namespace wavecast
