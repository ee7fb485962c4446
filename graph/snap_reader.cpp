#include "graph/snap_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "graph/line_reader.h"

namespace dype::kernels {
namespace {

// Maps ids to 0..N-1 in increasing order. Dense id ranges (max id not much larger than the
// edge count) use a direct table: O(E + max id) and no sort; sparse ones sort the distinct ids.
std::vector<std::int64_t> remap(EdgeList& g, std::int64_t max_id) {
  const std::int64_t ids = g.num_edges() * 2;
  std::vector<std::int64_t> original;
  if (g.num_edges() == 0) return original;
  if (max_id <= 4 * ids + 1024) {
    std::vector<std::int64_t> table(static_cast<std::size_t>(max_id) + 1, 0);
    for (std::int64_t v : g.src) table[static_cast<std::size_t>(v)] = 1;
    for (std::int64_t v : g.dst) table[static_cast<std::size_t>(v)] = 1;
    std::int64_t next = 0;
    for (std::int64_t id = 0; id <= max_id; ++id) {
      auto& slot = table[static_cast<std::size_t>(id)];
      if (slot != 0) {
        slot = next++;
        original.push_back(id);
      } else {
        slot = -1;
      }
    }
    for (auto& v : g.src) v = table[static_cast<std::size_t>(v)];
    for (auto& v : g.dst) v = table[static_cast<std::size_t>(v)];
  } else {
    original.reserve(static_cast<std::size_t>(ids));
    original.insert(original.end(), g.src.begin(), g.src.end());
    original.insert(original.end(), g.dst.begin(), g.dst.end());
    std::sort(original.begin(), original.end());
    original.erase(std::unique(original.begin(), original.end()), original.end());
    original.shrink_to_fit();
    auto index_of = [&](std::int64_t v) {
      return static_cast<std::int64_t>(std::lower_bound(original.begin(), original.end(), v) -
                                        original.begin());
    };
    for (auto& v : g.src) v = index_of(v);
    for (auto& v : g.dst) v = index_of(v);
  }
  g.num_nodes = static_cast<std::int64_t>(original.size());
  return original;
}

SnapGraph read_body(LineReader& in, const SnapOptions& options) {
  SnapGraph out;
  EdgeList& g = out.edges;
  if (in.size_bytes() > 0) {
    // A "a b\n" line is at least 4 bytes; reserve a guess without trusting it too far.
    const auto guess = static_cast<std::size_t>(in.size_bytes() / 12 + 16);
    g.src.reserve(guess);
    g.dst.reserve(guess);
    if (options.weighted) g.weight.reserve(guess);
  }
  std::int64_t max_id = -1;
  std::string_view line;
  const char* names[2] = {"source", "destination"};
  while (in.next(line)) {
    std::size_t pos = 0;
    const std::string_view first = text::next_token(line, pos);
    if (first.empty() || first[0] == '#' || first[0] == '%') continue;
    std::int64_t ends[2] = {0, 0};
    pos = 0;
    for (int k = 0; k < 2; ++k) {
      const std::string_view tok = text::next_token(line, pos);
      if (tok.empty()) {
        throw InputError(in.where(), std::string("expected 'source destination', missing the ") +
                                         names[k] + " node id");
      }
      if (!text::parse_int64(tok, ends[k])) {
        throw InputError(in.where(), std::string(names[k]) + " node id " + text::quote(tok) +
                                         " is not an integer");
      }
      if (ends[k] < 0) {
        throw InputError(in.where(), std::string(names[k]) + " node id " +
                                         std::to_string(ends[k]) + " is negative");
      }
      // Ids index a table below; an id near INT64_MAX would overflow num_nodes = max + 1.
      if (ends[k] == std::numeric_limits<std::int64_t>::max()) {
        throw InputError(in.where(), std::string(names[k]) + " node id " + text::quote(tok) +
                                         " is too large");
      }
    }
    float w = 1.0f;
    if (options.weighted) {
      const std::string_view tok = text::next_token(line, pos);
      double v = 0;
      if (tok.empty()) throw InputError(in.where(), "missing the weight column");
      if (!text::parse_double(tok, v)) {
        throw InputError(in.where(), "weight " + text::quote(tok) + " is not a number");
      }
      if (!std::isfinite(v) || std::fabs(v) > std::numeric_limits<float>::max()) {
        throw InputError(in.where(), "weight " + text::quote(tok) + " is NaN, infinite or "
                                                                    "overflows float32");
      }
      w = static_cast<float>(v);
    }
    if (!options.ignore_extra_columns && !text::rest_is_blank(line, pos)) {
      throw InputError(in.where(), "trailing garbage " + text::quote(text::next_token(line, pos)) +
                                       (options.weighted ? " after the weight"
                                                         : " after the two node ids"));
    }
    max_id = std::max({max_id, ends[0], ends[1]});
    g.src.push_back(ends[0]);
    g.dst.push_back(ends[1]);
    if (options.weighted) g.weight.push_back(w);
  }

  if (options.remap_ids) {
    out.original_ids = remap(g, max_id);
  } else {
    g.num_nodes = max_id + 1;
  }
  if (options.undirected) {
    const auto e = static_cast<std::size_t>(g.num_edges());
    g.src.reserve(2 * e);
    g.dst.reserve(2 * e);
    if (options.weighted) g.weight.reserve(2 * e);
    for (std::size_t k = 0; k < e; ++k) {
      const std::int64_t s = g.src[k];
      const std::int64_t d = g.dst[k];
      if (s == d) continue;
      g.src.push_back(d);
      g.dst.push_back(s);
      if (options.weighted) g.weight.push_back(float{g.weight[k]});
    }
  }
  return out;
}

}  // namespace

SnapGraph read_snap(const std::filesystem::path& path, const SnapOptions& options) {
  LineReader in(path);
  return read_body(in, options);
}

SnapGraph parse_snap(std::string_view text, const std::string& name, const SnapOptions& options) {
  LineReader in(text, name);
  return read_body(in, options);
}

}  // namespace dype::kernels
