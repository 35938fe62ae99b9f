#include "wavecast/learned/csv_table.h"

#include <gtest/gtest.h>

namespace wavecast::learned {
namespace {

TEST(CsvTableTest, QuotedFieldsKeepCommasQuotesAndNewlines) {
  const CsvTable t = CsvTable::parse("a,b,c\r\n1,\"x, y\",\"say \"\"hi\"\"\"\n2,\"two\nlines\",\n");
  ASSERT_EQ(t.header(), (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(t.rows().size(), 2u);
  EXPECT_EQ(t.rows()[0][1], "x, y");
  EXPECT_EQ(t.rows()[0][2], "say \"hi\"");
  EXPECT_EQ(t.rows()[1][1], "two\nlines");
  EXPECT_EQ(t.rows()[1][2], "");
  EXPECT_EQ(t.column("c"), 2u);
  EXPECT_FALSE(t.column("d").has_value());
  EXPECT_THROW(t.requireColumn("d"), std::runtime_error);
}

TEST(CsvTableTest, ShortRowsArePaddedAndMissingFilesNamed) {
  const CsvTable t = CsvTable::parse("a,b\n1\n");
  ASSERT_EQ(t.rows().size(), 1u);
  EXPECT_EQ(t.rows()[0].size(), 2u);
  try {
    CsvTable::readFile("/nonexistent/file.csv");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/file.csv"), std::string::npos);
  }
}

} // namespace
} // namespace wavecast::learned
