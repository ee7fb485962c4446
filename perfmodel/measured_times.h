#pragma once
// SpMM times measured elsewhere (another machine, another tool), read to check a model without
// the device: a CSV with a header naming the columns `N` (feature length) and `measured_ms`, in any
// order among others, one timing per line.
//
//   N,measured_ms
//   16,0.0556
//   32,0.0552
//
//   auto times = dype::perf::read_measured_times("debian-deps.csv");   // [{16, 5.56e-5}, ...]
//
// A file that cannot be read, lacks a column, has an empty, non-numeric or non-finite field, an N
// that is not a whole number > 0, a time <= 0, an N given twice, or no timing at all raises
// dype::InputError naming the file, the line and the field ("t.csv:3: field 'N' ...").
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace dype::perf {

struct MeasuredTime {
  std::int64_t n = 0;   // feature length
  double seconds = 0;   // measured time (the file holds milliseconds)
};

// Parses CSV text; `where` names it in errors (the file name). Lines keep their order; blank lines
// and lines starting with '#' are skipped.
std::vector<MeasuredTime> parse_measured_times(std::string_view text, const std::string& where);
std::vector<MeasuredTime> read_measured_times(const std::filesystem::path& file);

}  // namespace dype::perf
