#include "report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace dype::eval {

namespace {

std::string quoted(const std::string& f) {
  if (f.find_first_of(",\"\n") == std::string::npos) return f;
  std::string q = "\"";
  for (char c : f) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!(f << text) || !f.flush()) throw InputError("--out", "cannot write '" + path + "'");
}

}  // namespace

Report::Report(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_))
    throw InputError("--out", "cannot create the folder '" + dir_ + "'" + (ec ? ": " + ec.message() : std::string()));
  // Fail now, not after minutes of planning, when the folder is not writable.
  const std::string probe = dir_ + "/.dype-eval-write-check";
  write_file(probe, "");
  std::filesystem::remove(probe, ec);
}

void Report::csv(const std::string& name, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows) const {
  std::string text;
  const auto line = [&](const std::vector<std::string>& fields) {
    for (std::size_t i = 0; i < fields.size(); ++i) text += (i ? "," : "") + quoted(fields[i]);
    text += "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
  write_file(dir_ + "/" + name, text);
}

void Report::table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                   bool numbers) {
  const auto line = [&](const std::vector<std::string>& fields) {
    md << "|";
    for (const auto& f : fields) md << " " << f << " |";
    md << "\n";
  };
  line(header);
  md << "|";
  for (std::size_t i = 0; i < header.size(); ++i) md << (i == 0 || !numbers ? " --- |" : " ---: |");
  md << "\n";
  for (const auto& r : rows) line(r);
  md << "\n";
}

void Report::write_markdown() const { write_file(dir_ + "/report.md", md.str()); }

std::string fmt(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string ratio(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2fx", v);
  return buf;
}

std::string pct(double v) {
  if (!std::isfinite(v)) return "-";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f%%", v);
  return buf;
}

}  // namespace dype::eval
