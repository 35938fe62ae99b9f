#include "lsp/line_map.h"

#include <gtest/gtest.h>

namespace wavecast::lsp {
namespace {

TEST(LineMap, SameTextMapsEveryLineToItself) {
  const LineMap map = LineMap::between("a\nb\nc\n", "a\nb\nc\n");
  for (int line = 0; line < 3; ++line) {
    EXPECT_EQ(map.toAfter(line), line);
    EXPECT_EQ(map.toBefore(line), line);
  }
  EXPECT_EQ(map.toAfter(7), std::nullopt);
  EXPECT_EQ(map.toAfter(-1), std::nullopt);
}

TEST(LineMap, InsertedLinesShiftTheLinesBelow) {
  const LineMap map = LineMap::between("import torch\nx = conv(x)\ny = relu(x)\n",
                                       "import torch\n# new\n# lines\nx = conv(x)\ny = relu(x)\n");
  EXPECT_EQ(map.toAfter(0), 0);
  EXPECT_EQ(map.toAfter(1), 3);
  EXPECT_EQ(map.toAfter(2), 4);
  EXPECT_EQ(map.toBefore(1), std::nullopt); // an inserted line has no figures
  EXPECT_EQ(map.toBefore(3), 1);
}

TEST(LineMap, AnEditedLineMapsToNothingAndItsNeighboursStay) {
  const LineMap map =
      LineMap::between("a = 1\nb = conv(a)\nc = 3\n", "a = 1\nb = conv(a) * 2\nc = 3\n");
  EXPECT_EQ(map.toAfter(0), 0);
  EXPECT_EQ(map.toAfter(1), std::nullopt);
  EXPECT_EQ(map.toAfter(2), 2);
  EXPECT_EQ(map.toBefore(1), std::nullopt);
}

TEST(LineMap, SeparateEditsAndRepeatedLinesBetweenThem) {
  // Deleted first line, edited middle line, appended lines; "pass" and blank lines
  // repeat, so they are matched between unique anchors, not on their own. (Where
  // two alignments are equally long, either is right: the appended def avoids one.)
  const char* before = "del me\n"
                       "def f():\n"
                       "    pass\n"
                       "\n"
                       "def g():\n"
                       "    old = 1\n"
                       "    pass\n"
                       "\n"
                       "def h():\n"
                       "    pass\n";
  const char* after = "def f():\n"
                      "    pass\n"
                      "\n"
                      "def g():\n"
                      "    new = 2\n"
                      "    pass\n"
                      "\n"
                      "def h():\n"
                      "    pass\n"
                      "def i():\n"
                      "    return 1\n";
  const LineMap map = LineMap::between(before, after);
  EXPECT_EQ(map.toAfter(0), std::nullopt);
  EXPECT_EQ(map.toAfter(1), 0);
  EXPECT_EQ(map.toAfter(2), 1);
  EXPECT_EQ(map.toAfter(4), 3);
  EXPECT_EQ(map.toAfter(5), std::nullopt);
  EXPECT_EQ(map.toAfter(6), 5);
  EXPECT_EQ(map.toAfter(8), 7);
  EXPECT_EQ(map.toAfter(9), 8);
  EXPECT_EQ(map.toBefore(9), std::nullopt);
  EXPECT_EQ(map.toBefore(10), std::nullopt);
}

TEST(LineMap, MovedBlockKeepsTheLongestOrderedRun) {
  // Swapping two unique lines: one of them can stay matched, the other cannot.
  const LineMap map = LineMap::between("x\ny\nz\n", "y\nx\nz\n");
  const bool xKept = map.toAfter(0) == 1;
  const bool yKept = map.toAfter(1) == 0;
  EXPECT_TRUE(xKept != yKept);
  EXPECT_EQ(map.toAfter(2), 2);
}

} // namespace
} // namespace wavecast::lsp
