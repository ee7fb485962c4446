#pragma once
// The report folder dype-eval writes: report.md (assembled section by section) and one CSV per
// table or figure beside it.
#include <sstream>
#include <string>
#include <vector>

namespace dype::eval {

class Report {
 public:
  // Creates the folder; InputError("--out", ...) when it cannot be created or written.
  explicit Report(std::string dir);

  std::ostringstream md;  // report.md's text so far

  // Writes dir/name (a header row, then rows); fields with commas or quotes are quoted.
  void csv(const std::string& name, const std::vector<std::string>& header,
           const std::vector<std::vector<std::string>>& rows) const;
  // A markdown table into md; `numbers`: columns after the first right-aligned.
  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
             bool numbers = true);
  void write_markdown() const;  // dir/report.md
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

std::string fmt(double v, int digits = 3);        // "%.3g", "-" when not finite
std::string ratio(double v);                      // "2.06x", "-" when not finite
std::string pct(double v);                        // "5.9%"

}  // namespace dype::eval
