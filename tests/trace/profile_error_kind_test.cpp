#include "wavecast/trace.h"

#include <gtest/gtest.h>
#include <string>

namespace wavecast {
namespace {

TEST(ProfileErrorKind, EveryKindRoundTripsThroughItsName) {
  for (int i = 0; i <= static_cast<int>(ProfileErrorKind::Internal); ++i) {
    const auto kind = static_cast<ProfileErrorKind>(i);
    const std::string name = toString(kind);
    ASSERT_EQ(profileErrorKindFromString(name), kind) << name;
  }
}

TEST(ProfileErrorKind, NamesAreTheWireFormat) {
  EXPECT_STREQ(toString(ProfileErrorKind::UserException), "user_exception");
  EXPECT_STREQ(toString(ProfileErrorKind::OutOfMemory), "out_of_memory");
  EXPECT_EQ(profileErrorKindFromString("unsupported_operation"),
            ProfileErrorKind::UnsupportedOperation);
  EXPECT_EQ(profileErrorKindFromString("User_Exception"), std::nullopt);
  EXPECT_EQ(profileErrorKindFromString(""), std::nullopt);
}

} // namespace
} // namespace wavecast
