#include "runtime/repository/npy.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace dype::rt {

namespace {

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (34, 34), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string where) : s_(text), where_(std::move(where)) {}

  void parse(std::string& descr, bool& fortran, std::vector<std::int64_t>& shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip();
      if (peek() == '}') break;
      const std::string key = quoted();
      expect(':');
      if (key == "descr") {
        descr = quoted();
        have_descr = true;
      } else if (key == "fortran_order") {
        fortran = word();
        have_order = true;
      } else if (key == "shape") {
        shape = tuple();
        have_shape = true;
      } else {
        fail("unknown header key '" + key + "'");
      }
      skip();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}' in the header");
    }
    if (!have_descr || !have_order || !have_shape) fail("header lacks one of descr, fortran_order, shape");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw InputError(where_, what); }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  char peek() {
    skip();
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "' in the header");
    ++i_;
  }
  std::string quoted() {
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string in the header");
    const std::size_t end = s_.find(q, ++i_);
    if (end == std::string_view::npos) fail("unterminated string in the header");
    std::string out(s_.substr(i_, end - i_));
    i_ = end + 1;
    return out;
  }
  bool word() {
    skip();
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    fail("fortran_order must be True or False");
  }
  std::vector<std::int64_t> tuple() {
    expect('(');
    std::vector<std::int64_t> out;
    while (peek() != ')') {
      std::int64_t v = 0;
      int digits = 0;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        if (++digits > 15) fail("a shape dimension is too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (digits == 0) fail("shape must be a tuple of whole numbers");
      out.push_back(v);
      if (peek() == ',') ++i_;
    }
    ++i_;
    return out;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  std::string where_;
};

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string b = ss.str();
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) throw InputError(path, "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(b[6]);
  if (major < 1 || major > 3) throw InputError(path, ".npy format version " + std::to_string(major) + " is not 1, 2 or 3");
  std::size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(b[8]) | static_cast<std::size_t>(static_cast<unsigned char>(b[9])) << 8;
    start = 10;
  } else {
    if (b.size() < 12) throw InputError(path, "truncated header");
    for (int k = 3; k >= 0; --k) header_len = header_len << 8 | static_cast<unsigned char>(b[8 + k]);
    start = 12;
  }
  if (header_len > b.size() - start) throw InputError(path, "header length " + std::to_string(header_len) + " runs past the end of the file");
  NpyArray a;
  std::string descr;
  bool fortran = false;
  HeaderParser(std::string_view(b).substr(start, header_len), path).parse(descr, fortran, a.shape);
  if (fortran) throw InputError(path, "fortran_order arrays are not read (save with np.ascontiguousarray)");
  std::size_t esize = 0;
  if (descr == "<f4") esize = 4;
  else if (descr == "<f8") esize = 8;
  else throw InputError(path, "dtype '" + descr + "' is not read (float32 '<f4' or float64 '<f8')");
  std::size_t n = 1;
  for (std::int64_t d : a.shape) {
    if (d > 0 && n > (std::size_t{1} << 40) / static_cast<std::size_t>(d)) throw InputError(path, "shape too large");
    n *= static_cast<std::size_t>(d);
  }
  const std::size_t data = start + header_len;
  if (b.size() - data != n * esize) {
    throw InputError(path, "holds " + std::to_string(b.size() - data) + " data bytes, the shape needs " + std::to_string(n * esize));
  }
  a.data.resize(n);
  if (esize == 4) {
    if (n > 0) std::memcpy(a.data.data(), b.data() + data, n * 4);  // an empty vector's data() may be null
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, b.data() + data + 8 * i, 8);
      a.data[i] = static_cast<float>(v);
    }
  }
  return a;
}

void write_npy(const std::string& path, const std::vector<std::int64_t>& shape, std::span<const float> data) {
  std::string dims;
  for (std::int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 1);  // (34, 2) but (34,)
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic, version, length and header padded with spaces to a multiple of 64, ending in '\n'.
  const std::size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InputError(path, "cannot write");
  out.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<std::uint16_t>(header.size());
  out.put(static_cast<char>(len & 0xff));
  out.put(static_cast<char>(len >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * 4));
  if (!out) throw InputError(path, "write failed");
}

}  // namespace dype::rt
