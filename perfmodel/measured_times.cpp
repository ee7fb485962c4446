#include "perfmodel/measured_times.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"

namespace dype::perf {
namespace {

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto comma = line.find(',', start);
    out.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// The whole field as a finite number, or an InputError naming where it is.
double number(const std::string& field, const std::string& where, const std::string& name) {
  if (field.empty()) throw InputError(where, "field '" + name + "' is empty");
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  if (end != field.c_str() + field.size() || errno == ERANGE)
    throw InputError(where, "field '" + name + "' is '" + field + "', not a number");
  if (!std::isfinite(v)) throw InputError(where, "field '" + name + "' is '" + field + "', not a finite number");
  return v;
}

}  // namespace

std::vector<MeasuredTime> parse_measured_times(std::string_view text, const std::string& where) {
  std::vector<MeasuredTime> out;
  std::set<std::int64_t> seen;
  std::size_t n_col = 0, ms_col = 0, columns = 0;
  bool header = false;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto nl = text.find('\n', pos);
    const std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const std::string at = where + ":" + std::to_string(line_no);
    const std::vector<std::string> fields = split(t);
    if (!header) {
      bool has_n = false, has_ms = false;
      for (std::size_t i = 0; i < fields.size(); ++i) {
        if (fields[i] == "N" && !has_n) {
          n_col = i;
          has_n = true;
        } else if (fields[i] == "measured_ms" && !has_ms) {
          ms_col = i;
          has_ms = true;
        }
      }
      if (!has_n || !has_ms)
        throw InputError(at, std::string("header has no column '") + (has_n ? "measured_ms" : "N") +
                                 "' (expected columns N,measured_ms)");
      columns = fields.size();
      header = true;
      continue;
    }
    if (fields.size() != columns)
      throw InputError(at, std::to_string(fields.size()) + " fields, the header has " + std::to_string(columns));
    const double n = number(fields[n_col], at, "N");
    if (n <= 0 || n != std::floor(n) || n > 1e9)
      throw InputError(at, "field 'N' is '" + fields[n_col] + "', expected a whole number > 0");
    const double ms = number(fields[ms_col], at, "measured_ms");
    if (ms <= 0) throw InputError(at, "field 'measured_ms' is '" + fields[ms_col] + "', expected a time > 0");
    const auto ni = static_cast<std::int64_t>(n);
    if (!seen.insert(ni).second) throw InputError(at, "field 'N' is " + fields[n_col] + " again");
    out.push_back({ni, ms * 1e-3});
  }
  if (!header) throw InputError(where, "empty: expected a header N,measured_ms and one line per timing");
  if (out.empty()) throw InputError(where, "has a header but no timings");
  return out;
}

std::vector<MeasuredTime> read_measured_times(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file.string(), "cannot open measured times (CSV with columns N,measured_ms)");
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_measured_times(buf.str(), file.string());
}

}  // namespace dype::perf
