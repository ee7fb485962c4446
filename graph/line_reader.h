#pragma once
// Buffered line-by-line reading of text inputs (graph files) without iostreams, plus the token
// helpers the graph readers share. A LineReader yields each line as a string_view into its own
// buffer (valid until the next call), strips "\n" / "\r\n", and counts lines so that errors can
// name "<file>:<line>". Reads 4 MiB blocks, so a 2 GB edge list is never held in memory at once.
//
//   LineReader in("graph.mtx");
//   std::string_view line;
//   while (in.next(line)) { ... throw InputError(in.where(), "bad entry"); }
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dype::kernels {

class LineReader {
 public:
  // Opens a file; throws InputError(path, "cannot open: <reason>") if it cannot be read.
  explicit LineReader(const std::filesystem::path& path);
  // Reads from memory (network uploads, tests); `name` stands in for the file name in errors.
  LineReader(std::string_view text, std::string name);

  // Next line without its terminator; false at end of input.
  bool next(std::string_view& line);
  // 1-based number of the line last returned (0 before the first).
  std::int64_t line_number() const { return line_number_; }
  const std::string& name() const { return name_; }
  // "<name>:<line>" for the line last returned.
  std::string where() const { return name_ + ":" + std::to_string(line_number_); }
  // Size of the input in bytes when known (files, memory), else -1; used to bound reservations.
  std::int64_t size_bytes() const { return size_bytes_; }

 private:
  bool refill();

  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::string name_;
  std::vector<char> buffer_;
  std::string_view memory_;  // in-memory mode when file_ is null
  std::size_t begin_ = 0;    // first unread byte in buffer_ (or memory_)
  std::size_t end_ = 0;      // one past the last valid byte in buffer_
  bool eof_ = false;
  std::int64_t line_number_ = 0;
  std::int64_t size_bytes_ = -1;
};

// Token helpers shared by the readers. A token is a run of characters other than space and tab.
namespace text {

inline bool is_blank(char c) { return c == ' ' || c == '\t'; }

// Returns the next token of `line` starting at `pos` (skipping leading blanks) and advances pos
// past it; empty when the line is exhausted.
inline std::string_view next_token(std::string_view line, std::size_t& pos) {
  while (pos < line.size() && is_blank(line[pos])) ++pos;
  const std::size_t start = pos;
  while (pos < line.size() && !is_blank(line[pos])) ++pos;
  return line.substr(start, pos - start);
}

// True when only blanks remain.
inline bool rest_is_blank(std::string_view line, std::size_t pos) {
  while (pos < line.size() && is_blank(line[pos])) ++pos;
  return pos == line.size();
}

// Parses a whole token as a base-10 integer / floating-point number; false on any stray
// character or overflow. Floats accept "nan"/"inf" so callers can reject them by name.
bool parse_int64(std::string_view token, std::int64_t& out);
bool parse_double(std::string_view token, double& out);

// Quotes a token for an error message, shortened so a binary blob cannot flood a log.
std::string quote(std::string_view token);

}  // namespace text
}  // namespace dype::kernels
