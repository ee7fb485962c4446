#include "graph/mtx_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "graph/line_reader.h"

namespace dype::kernels {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_comment_or_blank(std::string_view line) {
  std::size_t pos = 0;
  while (pos < line.size() && text::is_blank(line[pos])) ++pos;
  return pos == line.size() || line[pos] == '%';
}

std::string_view to_string(MtxSymmetry s) {
  switch (s) {
    case MtxSymmetry::general: return "general";
    case MtxSymmetry::symmetric: return "symmetric";
    case MtxSymmetry::skew_symmetric: return "skew-symmetric";
  }
  return "?";
}

// Parses "%%MatrixMarket matrix coordinate <field> <symmetry>" (tokens are case-insensitive).
MtxHeader parse_banner(LineReader& in) {
  std::string_view line;
  if (!in.next(line)) {
    throw InputError(in.name() + ":1", "empty file, expected a %%MatrixMarket banner");
  }
  std::size_t pos = 0;
  const std::string_view tag = text::next_token(line, pos);
  if (lower(tag) != "%%matrixmarket") {
    throw InputError(in.where(), "expected a '%%MatrixMarket matrix coordinate <field> "
                                 "<symmetry>' banner, found " + text::quote(line));
  }
  const std::string object = lower(text::next_token(line, pos));
  const std::string format = lower(text::next_token(line, pos));
  const std::string field = lower(text::next_token(line, pos));
  const std::string symmetry = lower(text::next_token(line, pos));
  if (object != "matrix") {
    throw InputError(in.where(), "banner object " + text::quote(object) + " is not 'matrix'");
  }
  if (format == "array") {
    throw InputError(in.where(), "dense 'array' format is not a graph; expected 'coordinate'");
  }
  if (format != "coordinate") {
    throw InputError(in.where(), "banner format " + text::quote(format) +
                                     " is not 'coordinate'");
  }
  MtxHeader h;
  if (field == "pattern") {
    h.field = MtxField::pattern;
  } else if (field == "real" || field == "double") {
    h.field = MtxField::real;
  } else if (field == "integer") {
    h.field = MtxField::integer;
  } else if (field == "complex") {
    throw InputError(in.where(), "complex matrices are not supported (field 'complex')");
  } else {
    throw InputError(in.where(), "banner field " + text::quote(field) +
                                     " is not one of pattern, real, integer");
  }
  if (symmetry == "general") {
    h.symmetry = MtxSymmetry::general;
  } else if (symmetry == "symmetric") {
    h.symmetry = MtxSymmetry::symmetric;
  } else if (symmetry == "skew-symmetric") {
    h.symmetry = MtxSymmetry::skew_symmetric;
  } else if (symmetry == "hermitian") {
    throw InputError(in.where(), "hermitian matrices are not supported");
  } else {
    throw InputError(in.where(), "banner symmetry " + text::quote(symmetry) +
                                     " is not one of general, symmetric, skew-symmetric");
  }
  if (!text::rest_is_blank(line, pos)) {
    throw InputError(in.where(), "unexpected text after the banner: " +
                                     text::quote(text::next_token(line, pos)));
  }
  if (h.field == MtxField::pattern && h.symmetry == MtxSymmetry::skew_symmetric) {
    throw InputError(in.where(), "a pattern matrix cannot be skew-symmetric");
  }
  return h;
}

// Skips comments and blank lines, then parses "rows cols entries".
void parse_size_line(LineReader& in, MtxHeader& h) {
  std::string_view line;
  do {
    if (!in.next(line)) {
      throw InputError(in.where(), "file ends before the size line 'rows cols entries'");
    }
  } while (is_comment_or_blank(line));
  std::size_t pos = 0;
  const char* names[3] = {"row count", "column count", "entry count"};
  std::int64_t* values[3] = {&h.rows, &h.cols, &h.entries};
  for (int k = 0; k < 3; ++k) {
    const std::string_view tok = text::next_token(line, pos);
    if (tok.empty()) {
      throw InputError(in.where(), std::string("size line needs 'rows cols entries', missing the ") +
                                       names[k]);
    }
    if (!text::parse_int64(tok, *values[k])) {
      throw InputError(in.where(), std::string("size line: ") + names[k] + " " + text::quote(tok) +
                                       " is not an integer");
    }
    if (*values[k] < 0) {
      throw InputError(in.where(), std::string("size line: ") + names[k] + " " +
                                       std::to_string(*values[k]) + " is negative");
    }
  }
  if (!text::rest_is_blank(line, pos)) {
    throw InputError(in.where(), "size line: unexpected text " +
                                     text::quote(text::next_token(line, pos)) +
                                     " after 'rows cols entries'");
  }
  if (h.symmetry != MtxSymmetry::general && h.rows != h.cols) {
    throw InputError(in.where(), "a " + std::string(to_string(h.symmetry)) + " matrix must be "
                                     "square, size line says " + std::to_string(h.rows) + " x " +
                                     std::to_string(h.cols));
  }
  // More entries than cells means the counts contradict each other (checked in long double: the
  // product of two int64 counts can overflow).
  long double cells = static_cast<long double>(h.rows) * static_cast<long double>(h.cols);
  if (h.symmetry == MtxSymmetry::symmetric) {
    cells = static_cast<long double>(h.rows) * (static_cast<long double>(h.rows) + 1) / 2;
  } else if (h.symmetry == MtxSymmetry::skew_symmetric) {
    cells = static_cast<long double>(h.rows) * (static_cast<long double>(h.rows) - 1) / 2;
  }
  if (static_cast<long double>(h.entries) > cells) {
    throw InputError(in.where(), "size line: " + std::to_string(h.entries) +
                                     " entries do not fit a " + std::to_string(h.rows) + " x " +
                                     std::to_string(h.cols) + " " +
                                     std::string(to_string(h.symmetry)) + " matrix");
  }
}

EdgeList read_body(LineReader& in, const MtxOptions& options) {
  MtxHeader h = parse_banner(in);
  parse_size_line(in, h);
  if (h.rows != h.cols && !options.allow_rectangular) {
    throw InputError(in.where(), "matrix is " + std::to_string(h.rows) + " x " +
                                     std::to_string(h.cols) +
                                     "; a graph's adjacency matrix must be square");
  }
  const bool mirror = h.symmetry != MtxSymmetry::general;
  const bool keep_values = options.read_values && h.field != MtxField::pattern;

  EdgeList g;
  g.num_nodes = std::max(h.rows, h.cols);
  // Reserve what the file can hold: a lying size line must not make us allocate terabytes.
  std::int64_t expect = h.entries;
  if (in.size_bytes() >= 0) expect = std::min(expect, in.size_bytes() / 4 + 1);
  if (mirror) expect *= 2;
  g.src.reserve(static_cast<std::size_t>(expect));
  g.dst.reserve(static_cast<std::size_t>(expect));
  if (keep_values) g.weight.reserve(static_cast<std::size_t>(expect));

  const std::string row_range = " out of range [1, " + std::to_string(h.rows) + "]";
  const std::string col_range = " out of range [1, " + std::to_string(h.cols) + "]";
  std::int64_t read = 0;
  std::string_view line;
  while (in.next(line)) {
    if (line.empty() || line[0] == '%' || is_comment_or_blank(line)) continue;
    if (read == h.entries) {
      throw InputError(in.where(), "trailing data after the " + std::to_string(h.entries) +
                                       " declared entries: " + text::quote(line));
    }
    std::size_t pos = 0;
    const std::string_view ti = text::next_token(line, pos);
    const std::string_view tj = text::next_token(line, pos);
    std::int64_t i = 0;
    std::int64_t j = 0;
    if (!text::parse_int64(ti, i)) {
      throw InputError(in.where(), "row index " + text::quote(ti) + " is not an integer");
    }
    if (tj.empty()) throw InputError(in.where(), "entry has a row index but no column index");
    if (!text::parse_int64(tj, j)) {
      throw InputError(in.where(), "column index " + text::quote(tj) + " is not an integer");
    }
    if (i < 1 || i > h.rows) {
      throw InputError(in.where(), "row index " + std::to_string(i) + row_range);
    }
    if (j < 1 || j > h.cols) {
      throw InputError(in.where(), "column index " + std::to_string(j) + col_range);
    }
    float w = 1.0f;
    if (h.field != MtxField::pattern) {
      const std::string_view tv = text::next_token(line, pos);
      if (tv.empty()) throw InputError(in.where(), "entry has no value (field is not pattern)");
      double v = 0;
      if (h.field == MtxField::integer) {
        std::int64_t iv = 0;
        if (!text::parse_int64(tv, iv)) {
          throw InputError(in.where(), "value " + text::quote(tv) + " is not an integer");
        }
        v = static_cast<double>(iv);
      } else if (!text::parse_double(tv, v)) {
        throw InputError(in.where(), "value " + text::quote(tv) + " is not a number");
      }
      if (std::isnan(v)) throw InputError(in.where(), "value is NaN");
      if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max()) {
        throw InputError(in.where(), "value " + text::quote(tv) + " is infinite or overflows "
                                                                  "float32");
      }
      w = static_cast<float>(v);
    }
    if (!text::rest_is_blank(line, pos)) {
      throw InputError(in.where(), "trailing garbage " + text::quote(text::next_token(line, pos)) +
                                       " after the entry");
    }
    if (h.symmetry == MtxSymmetry::skew_symmetric && i == j) {
      throw InputError(in.where(), "skew-symmetric matrix has a diagonal entry (" +
                                       std::to_string(i) + ", " + std::to_string(j) + ")");
    }
    g.src.push_back(i - 1);
    g.dst.push_back(j - 1);
    if (keep_values) g.weight.push_back(w);
    if (mirror && i != j) {
      g.src.push_back(j - 1);
      g.dst.push_back(i - 1);
      if (keep_values) g.weight.push_back(h.symmetry == MtxSymmetry::skew_symmetric ? -w : w);
    }
    ++read;
  }
  if (read < h.entries) {
    throw InputError(in.where(), "file ends after " + std::to_string(read) + " of " +
                                     std::to_string(h.entries) + " declared entries (truncated)");
  }
  return g;
}

}  // namespace

EdgeList read_mtx(const std::filesystem::path& path, const MtxOptions& options) {
  LineReader in(path);
  return read_body(in, options);
}

EdgeList parse_mtx(std::string_view text, const std::string& name, const MtxOptions& options) {
  LineReader in(text, name);
  return read_body(in, options);
}

MtxHeader read_mtx_header(const std::filesystem::path& path) {
  LineReader in(path);
  MtxHeader h = parse_banner(in);
  parse_size_line(in, h);
  return h;
}

}  // namespace dype::kernels
