// SpMM times measured elsewhere (dype-profile validate --measured): a CSV with columns N and
// measured_ms; every malformed file is refused with the file, line and field named.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/error.h"
#include "perfmodel/measured_times.h"
#include "../test_temp_dir.h"

namespace dype::perf {
namespace {

std::string error_of(const std::string& text) {
  try {
    (void)parse_measured_times(text, "t.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(PerfMeasuredTimes, ReadsTheColumnsByName) {
  const auto t = parse_measured_times("N,measured_ms\n16,0.0556\n32,0.0552\n", "t.csv");
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].n, 16);
  EXPECT_DOUBLE_EQ(t[0].seconds, 0.0556e-3);
  EXPECT_EQ(t[1].n, 32);
  // Other columns, any order, CRLF, blank and comment lines, spaces around fields.
  const auto u = parse_measured_times("# H200\r\nmeasured_ms, graph ,N\r\n\r\n 1.5 ,wordnet, 512\r\n", "t.csv");
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].n, 512);
  EXPECT_DOUBLE_EQ(u[0].seconds, 1.5e-3);
}

TEST(PerfMeasuredTimes, BadFilesNameTheLineAndField) {
  EXPECT_EQ(error_of(""), "t.csv: empty: expected a header N,measured_ms and one line per timing");
  EXPECT_EQ(error_of("N,measured_ms\n"), "t.csv: has a header but no timings");
  EXPECT_EQ(error_of("N,ms\n16,1\n"), "t.csv:1: header has no column 'measured_ms' (expected columns N,measured_ms)");
  EXPECT_EQ(error_of("n,measured_ms\n16,1\n"), "t.csv:1: header has no column 'N' (expected columns N,measured_ms)");
  EXPECT_EQ(error_of("N,measured_ms\n16,1\n32,fast\n"), "t.csv:3: field 'measured_ms' is 'fast', not a number");
  EXPECT_EQ(error_of("N,measured_ms\n16,1\n\n0,1\n"), "t.csv:4: field 'N' is '0', expected a whole number > 0");
  EXPECT_EQ(error_of("N,measured_ms\n-16,1\n"), "t.csv:2: field 'N' is '-16', expected a whole number > 0");
  EXPECT_EQ(error_of("N,measured_ms\n16.5,1\n"), "t.csv:2: field 'N' is '16.5', expected a whole number > 0");
  EXPECT_EQ(error_of("N,measured_ms\nx16,1\n"), "t.csv:2: field 'N' is 'x16', not a number");
  EXPECT_EQ(error_of("N,measured_ms\n16,\n"), "t.csv:2: field 'measured_ms' is empty");
  EXPECT_EQ(error_of("N,measured_ms\n16,0\n"), "t.csv:2: field 'measured_ms' is '0', expected a time > 0");
  EXPECT_EQ(error_of("N,measured_ms\n16,nan\n"), "t.csv:2: field 'measured_ms' is 'nan', not a finite number");
  EXPECT_EQ(error_of("N,measured_ms\n16,1,2\n"), "t.csv:2: 3 fields, the header has 2");
  EXPECT_EQ(error_of("N,measured_ms\n16,1\n16,2\n"), "t.csv:3: field 'N' is 16 again");
}

TEST(PerfMeasuredTimes, ReadsAFileAndNamesAMissingOne) {
  const auto dir = test::process_temp_dir("dype_measured_times");
  const auto file = dir / "g.csv";
  std::ofstream(file) << "N,measured_ms\n64,0.25\n";
  const auto t = read_measured_times(file);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_DOUBLE_EQ(t[0].seconds, 0.25e-3);
  EXPECT_THROW((void)read_measured_times(dir / "none.csv"), InputError);
}

}  // namespace
}  // namespace dype::perf
