#include "graph/line_reader.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace dype::kernels {
namespace {
constexpr std::size_t kBlockBytes = std::size_t{4} << 20;
// A line longer than this is not a graph file (or is a corrupt one); refuse rather than grow.
constexpr std::size_t kMaxLineBytes = std::size_t{64} << 20;
}  // namespace

LineReader::LineReader(const std::filesystem::path& path) : name_(path.string()) {
  file_.reset(std::fopen(name_.c_str(), "rb"));
  if (!file_) throw InputError(name_, std::string("cannot open: ") + std::strerror(errno));
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) size_bytes_ = static_cast<std::int64_t>(size);
  buffer_.resize(kBlockBytes);
}

LineReader::LineReader(std::string_view text, std::string name)
    : name_(std::move(name)), memory_(text), end_(text.size()), eof_(true),
      size_bytes_(static_cast<std::int64_t>(text.size())) {}

bool LineReader::refill() {
  if (eof_) return false;
  // Keep the partial line, then read after it.
  const std::size_t keep = end_ - begin_;
  if (keep > 0 && begin_ > 0) std::memmove(buffer_.data(), buffer_.data() + begin_, keep);
  begin_ = 0;
  end_ = keep;
  if (end_ == buffer_.size()) {
    if (buffer_.size() >= kMaxLineBytes) {
      throw InputError(name_ + ":" + std::to_string(line_number_ + 1),
                       "line longer than " + std::to_string(kMaxLineBytes >> 20) + " MiB");
    }
    buffer_.resize(buffer_.size() * 2);
  }
  const std::size_t got = std::fread(buffer_.data() + end_, 1, buffer_.size() - end_, file_.get());
  if (got == 0) {
    if (std::ferror(file_.get())) {
      throw InputError(name_ + ":" + std::to_string(line_number_ + 1), "read error");
    }
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

bool LineReader::next(std::string_view& line) {
  const char* base = file_ ? buffer_.data() : memory_.data();
  std::size_t scan = begin_;
  for (;;) {
    const void* nl = (end_ > scan) ? std::memchr(base + scan, '\n', end_ - scan) : nullptr;
    if (nl != nullptr) {
      const std::size_t pos = static_cast<std::size_t>(static_cast<const char*>(nl) - base);
      std::size_t len = pos - begin_;
      if (len > 0 && base[begin_ + len - 1] == '\r') --len;
      line = std::string_view(base + begin_, len);
      begin_ = pos + 1;
      ++line_number_;
      return true;
    }
    const std::size_t scanned = end_ - begin_;
    if (!file_ || !refill()) break;
    base = buffer_.data();
    scan = scanned;  // refill moved the partial line to the front
  }
  if (begin_ >= end_) return false;
  // Last line without a terminator.
  std::size_t len = end_ - begin_;
  if (base[begin_ + len - 1] == '\r') --len;
  line = std::string_view(base + begin_, len);
  begin_ = end_;
  ++line_number_;
  return true;
}

namespace text {

bool parse_int64(std::string_view token, std::int64_t& out) {
  const char* first = token.data();
  const char* last = first + token.size();
  if (first != last && *first == '+') ++first;  // from_chars rejects a leading '+'
  auto [ptr, ec] = std::from_chars(first, last, out);
  return ec == std::errc() && ptr == last && first != last;
}

bool parse_double(std::string_view token, double& out) {
  const char* first = token.data();
  const char* last = first + token.size();
  if (first != last && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, out, std::chars_format::general);
  // Out-of-range values (1e999, 1e-999) report result_out_of_range; strtod (rare path) turns them
  // into +-inf or 0, so the caller's finiteness check names the overflow.
  if (ec == std::errc::result_out_of_range && ptr == last) {
    const std::string copy(first, last);
    out = std::strtod(copy.c_str(), nullptr);
    return true;
  }
  return ec == std::errc() && ptr == last && first != last;
}

std::string quote(std::string_view token) {
  constexpr std::size_t kMax = 40;
  std::string out = "'";
  for (char c : token.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  if (token.size() > kMax) out += "...";
  out += "'";
  return out;
}

}  // namespace text
}  // namespace dype::kernels
